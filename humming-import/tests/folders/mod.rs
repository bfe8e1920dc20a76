//! Test helpers: copies of the fixture folders under the system's temporary folder, with their
//! settings or tensors edited, to check the refusals.

#![allow(dead_code)]

use safetensors::{Dtype, tensor::TensorView};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub type Tensors = BTreeMap<String, (Dtype, Vec<usize>, Vec<u8>)>;

/// A copy of a fixture folder, removed when dropped.
pub struct TempFolder(PathBuf);

impl std::ops::Deref for TempFolder {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<Path> for TempFolder {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempFolder {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A fresh copy of fixture folder `name` under the system's temporary folder.
pub fn copy_fixture(name: &str, case: &str) -> TempFolder {
    let src = fixture_path(name);
    let dst = std::env::temp_dir().join(format!(
        "humming-import-{}-{case}-{name}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dst);
    std::fs::create_dir_all(&dst).unwrap();
    for e in std::fs::read_dir(&src).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), dst.join(e.file_name())).unwrap();
    }
    TempFolder(dst)
}

/// Rewrites `file` of `dir` as JSON after `edit`.
pub fn edit_json(dir: &Path, file: &str, edit: impl FnOnce(&mut Value)) {
    let path = dir.join(file);
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    edit(&mut v);
    std::fs::write(&path, serde_json::to_string_pretty(&v).unwrap()).unwrap();
}

pub fn edit_quant_config(dir: &Path, key: &str, value: Value) {
    edit_json(dir, "config.json", |v| {
        v["quantization_config"][key] = value;
    });
}

/// Rewrites `dir/model.safetensors` after `edit`.
pub fn edit_tensors(dir: &Path, edit: impl FnOnce(&mut Tensors)) {
    let path = dir.join("model.safetensors");
    let bytes = std::fs::read(&path).unwrap();
    let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let mut tensors: Tensors = st
        .tensors()
        .into_iter()
        .map(|(name, t)| (name, (t.dtype(), t.shape().to_vec(), t.data().to_vec())))
        .collect();
    edit(&mut tensors);
    let views: Vec<(String, TensorView<'_>)> = tensors
        .iter()
        .map(|(name, (dtype, shape, data))| {
            (
                name.clone(),
                TensorView::new(*dtype, shape.clone(), data).unwrap(),
            )
        })
        .collect();
    safetensors::serialize_to_file(views, None, &path).unwrap();
}

pub fn fixture_path(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}
