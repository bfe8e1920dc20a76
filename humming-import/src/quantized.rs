//! Quantized safetensors checkpoints (GPTQ, AWQ, compressed-tensors, DeepSeek FP8, ModelOpt
//! NVFP4): a model folder's settings and shards, its quantized linear layers, and each layer
//! unpacked into exact [`QuantizedWeights`] with the `gemm!` descriptor that runs them.
//!
//! A folder holds `config.json` (with `quantization_config`) or an older `quantize_config.json`
//! ([`QuantConfig`]), and its tensors in `model.safetensors.index.json`'s shards, else in every
//! `*.safetensors` file of the folder, each memory-mapped ([`SafetensorsFile`]). A quantized
//! layer is a prefix with a `<prefix>.qweight` tensor (GPTQ, AWQ), `<prefix>.weight_packed` or
//! `<prefix>.weight_scale` (compressed-tensors, ModelOpt), `<prefix>.weight_scale_inv` (FP8); the
//! packing of each method is described in [`crate::gptq`], [`crate::compressed`] and
//! [`crate::fp8_nvfp4`].
//!
//! N and K come from the packed shapes and the settings together (every other tensor of the layer
//! must agree with them, or the layer is refused); nothing is transposed, so a square layer reads
//! the same way as any other.
//!
//! ```no_run
//! use humming_import::QuantizedCheckpoint;
//! let ckpt = QuantizedCheckpoint::open("SmolLM2-135M-GPTQ")?;
//! for info in ckpt.layers()? {
//!     let layer = ckpt.layer(&info.prefix)?; // exact codes, scales and zero points
//!     println!("{} [{}, {}] {}: {}", info.prefix, info.n, info.k, info.format, layer.spec_text);
//! }
//! # Ok::<(), humming_import::Error>(())
//! ```

use crate::checkpoint::{SafetensorsFile, SafetensorsInfo};
use crate::compressed::{Parts, Plan};
use crate::error::{Error, Result};
use crate::quant_config::{QuantConfig, QuantMethod};
use humming_runtime::QuantizedWeights;
use humming_spec::{KernelSpec, parse_kernel_str};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// An open quantized checkpoint folder.
#[derive(Debug)]
pub struct QuantizedCheckpoint {
    dir: PathBuf,
    config: QuantConfig,
    shards: Vec<SafetensorsFile>,
    names: BTreeMap<String, usize>,
}

/// One quantized linear layer of a checkpoint, as listed (nothing unpacked).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QuantLayerInfo {
    /// The layer's prefix, e.g. `model.layers.0.self_attn.q_proj`.
    pub prefix: String,
    /// Its format, e.g. `GPTQ 4-bit g128 asym v1` ([`QuantConfig::describe`]).
    pub format: String,
    /// Output features (rows of the `[N, K]` weights).
    pub n: usize,
    /// Input features.
    pub k: usize,
    /// Bytes of its tensors in the files (packed codes, zero points, scales, `g_idx`).
    pub bytes: usize,
    /// The `gemm!` fields of the kernel that runs it without loss.
    pub spec_text: String,
}

/// One quantized layer, unpacked.
#[derive(Clone, Debug, PartialEq)]
pub struct ImportedLayer {
    /// The layer's prefix.
    pub prefix: String,
    /// The weights `[N, K]`: plain codes, scales and zero points, exactly the checkpoint's. With
    /// `k_perm`, K is in permuted order.
    pub weights: QuantizedWeights,
    /// The `gemm!` fields that declare its kernel (parsed: `weights.spec()`).
    pub spec_text: String,
    /// Act-order (GPTQ `desc_act` with an unsorted `g_idx`): column `j` of `weights` is column
    /// `k_perm[j]` of the checkpoint's weights, so that each scale group is contiguous. The product
    /// `A · Wᵀ` is then `A[:, k_perm] · weightsᵀ`: gather A's columns by `k_perm`. `None` when K is
    /// in its own order.
    pub k_perm: Option<Vec<usize>>,
}

impl ImportedLayer {
    /// The kernel descriptor of the weights.
    pub fn spec(&self) -> &KernelSpec {
        self.weights.spec()
    }

    /// The dequantized weights `[N, K]` in the checkpoint's own K order (undoing `k_perm`), in f64:
    /// `scale * (q - z)`, exact.
    pub fn dequantize_unpermuted(&self) -> Vec<f64> {
        let w = self.weights.dequantize();
        let Some(perm) = &self.k_perm else {
            return w;
        };
        let k = self.weights.k();
        let mut out = vec![0.0; w.len()];
        for (row_out, row) in out.chunks_exact_mut(k).zip(w.chunks_exact(k)) {
            for (j, &src) in perm.iter().enumerate() {
                row_out[src] = row[j];
            }
        }
        out
    }

    /// Gathers the columns of a row-major `[M, K]` activation matrix into the weights' K order
    /// (`a[:, k_perm]`); a copy when there is no permutation.
    pub fn permute_activations(&self, a: &[f32]) -> Vec<f32> {
        let Some(perm) = &self.k_perm else {
            return a.to_vec();
        };
        let k = perm.len();
        a.chunks_exact(k)
            .flat_map(|row| perm.iter().map(move |&src| row[src]))
            .collect()
    }
}

impl QuantizedCheckpoint {
    /// Opens the model folder `dir`: its settings ([`QuantConfig::from_dir`]) and its shards,
    /// memory-mapped (the files must not change while the value lives).
    ///
    /// # Errors
    /// As [`QuantConfig::from_dir`]; [`Error::Io`], [`Error::Json`], [`Error::Safetensors`];
    /// [`Error::Folder`] when there is no shard, the index names a missing file or a tensor its
    /// file lacks, or a tensor is in two shards.
    pub fn open(dir: impl AsRef<Path>) -> Result<Self> {
        Self::open_as(dir.as_ref(), false)
    }

    /// As [`QuantizedCheckpoint::open`], but reads compressed-tensors W8A8 schemes as weight-only:
    /// every group's `input_activations` is ignored, so that each layer gets the 16-bit-activation
    /// descriptor of its weights (`a: bf16` or the scales' 16-bit dtype), also for activation forms
    /// that [`QuantizedCheckpoint::open`] refuses (static or asymmetric activation scales). An
    /// explicit choice: the kernels then do not quantize A as the checkpoint was calibrated for.
    /// Other methods carry no activation scheme and open as with `open`.
    ///
    /// # Errors
    /// As [`QuantizedCheckpoint::open`], less the `input_activations` refusals.
    pub fn open_weight_only(dir: impl AsRef<Path>) -> Result<Self> {
        Self::open_as(dir.as_ref(), true)
    }

    fn open_as(dir: &Path, weight_only: bool) -> Result<Self> {
        let config = QuantConfig::from_dir_as(dir, weight_only)?;
        let folder_err = |msg: String| Error::Folder {
            path: dir.display().to_string(),
            msg,
        };
        let index_path = dir.join("model.safetensors.index.json");
        let (files, weight_map) = if index_path.is_file() {
            let map = read_index(&index_path)?;
            let mut files: Vec<String> = map.values().cloned().collect();
            files.sort();
            files.dedup();
            (files, Some(map))
        } else {
            let entries = std::fs::read_dir(dir).map_err(|source| Error::Io {
                path: dir.display().to_string(),
                source,
            })?;
            let mut files = Vec::new();
            for e in entries {
                let e = e.map_err(|source| Error::Io {
                    path: dir.display().to_string(),
                    source,
                })?;
                let name = e.file_name().to_string_lossy().into_owned();
                if name.ends_with(".safetensors") {
                    files.push(name);
                }
            }
            files.sort();
            (files, None)
        };
        if files.is_empty() {
            return Err(folder_err("no *.safetensors file".to_owned()));
        }
        let mut shards = Vec::with_capacity(files.len());
        let mut names = BTreeMap::new();
        for (i, file) in files.iter().enumerate() {
            let path = dir.join(file);
            if !path.is_file() {
                return Err(folder_err(format!(
                    "the index names {file}, which is absent"
                )));
            }
            let shard = SafetensorsFile::open(&path)?;
            for t in shard.tensors() {
                if let Some(j) = names.insert(t.name.clone(), i) {
                    return Err(folder_err(format!(
                        "tensor `{}` is in both {} and {file}",
                        t.name, files[j]
                    )));
                }
            }
            shards.push(shard);
        }
        if let Some(map) = weight_map {
            for (tensor, file) in &map {
                if names.get(tensor).map(|&i| &files[i]) != Some(file) {
                    return Err(folder_err(format!(
                        "the index puts tensor `{tensor}` in {file}, which does not hold it"
                    )));
                }
            }
        }
        Ok(QuantizedCheckpoint {
            dir: dir.to_owned(),
            config,
            shards,
            names,
        })
    }

    /// The folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The quantization settings.
    pub fn config(&self) -> &QuantConfig {
        &self.config
    }

    /// Every tensor name of every shard, sorted.
    pub fn tensor_names(&self) -> impl Iterator<Item = &str> {
        self.names.keys().map(String::as_str)
    }

    /// Tensor `name`'s entry and raw bytes, from whichever shard holds it.
    ///
    /// # Errors
    /// [`Error::MissingTensor`].
    pub fn tensor_bytes(&self, name: &str) -> Result<(SafetensorsInfo, &[u8])> {
        let &i = self.names.get(name).ok_or_else(|| Error::MissingTensor {
            name: name.to_owned(),
        })?;
        self.shards[i].tensor_bytes(name)
    }

    /// Tensor `<prefix>.<field>` of a quantized layer, or `None` when absent.
    pub(crate) fn part(
        &self,
        prefix: &str,
        field: &'static str,
    ) -> Result<Option<(SafetensorsInfo, &[u8])>> {
        let name = format!("{prefix}.{field}");
        if !self.names.contains_key(&name) {
            return Ok(None);
        }
        self.tensor_bytes(&name).map(Some)
    }

    /// Tensor `<prefix>.<field>` of a quantized layer.
    ///
    /// # Errors
    /// [`Error::MissingQuantTensor`] naming the layer, the field and the tensor.
    pub(crate) fn required(
        &self,
        prefix: &str,
        field: &'static str,
    ) -> Result<(SafetensorsInfo, &[u8])> {
        self.part(prefix, field)?
            .ok_or_else(|| Error::MissingQuantTensor {
                layer: prefix.to_owned(),
                field,
                tensor: format!("{prefix}.{field}"),
            })
    }

    /// The prefixes of the quantized layers, sorted: every `<prefix>.qweight` (GPTQ, AWQ),
    /// `<prefix>.weight_packed` or `<prefix>.weight_scale` (compressed-tensors, ModelOpt),
    /// `<prefix>.weight_scale_inv` (FP8).
    pub fn layer_prefixes(&self) -> Vec<String> {
        let markers: &[&str] = match self.config.method {
            QuantMethod::Gptq | QuantMethod::Awq => &[".qweight"],
            QuantMethod::CompressedTensors => &[".weight_packed", ".weight_scale"],
            QuantMethod::Fp8 => &[".weight_scale_inv"],
            QuantMethod::ModelOptNvfp4 => &[".weight_scale"],
        };
        let set: BTreeSet<&str> = self
            .names
            .keys()
            .filter_map(|n| markers.iter().find_map(|m| n.strip_suffix(m)))
            .collect();
        set.into_iter().map(str::to_owned).collect()
    }

    /// A float or compressed-tensors layer, checked and (with `values`) unpacked.
    fn plan(&self, prefix: &str, values: bool) -> Result<(Plan, Option<Parts>)> {
        match self.config.method {
            QuantMethod::CompressedTensors => crate::compressed::read(self, prefix, values),
            _ => crate::fp8_nvfp4::read(self, prefix, values),
        }
    }

    /// Lists every quantized layer with its format, shape, bytes and descriptor, checking the
    /// shapes and dtypes of its tensors (not their values: see [`QuantizedCheckpoint::layer`]).
    ///
    /// # Errors
    /// As [`QuantizedCheckpoint::layer_info`], for the first layer that fails.
    pub fn layers(&self) -> Result<Vec<QuantLayerInfo>> {
        self.layer_prefixes()
            .iter()
            .map(|p| self.layer_info(p))
            .collect()
    }

    /// Layer `prefix`'s format, shape, bytes and descriptor.
    ///
    /// # Errors
    /// [`Error::MissingQuantTensor`], [`Error::QuantDtype`], [`Error::QuantShape`] naming the
    /// tensor and field that disagree with the settings or with the layer's other tensors.
    pub fn layer_info(&self, prefix: &str) -> Result<QuantLayerInfo> {
        if !matches!(self.config.method, QuantMethod::Gptq | QuantMethod::Awq) {
            let (p, _) = self.plan(prefix, false)?;
            return Ok(QuantLayerInfo {
                prefix: prefix.to_owned(),
                format: p.format,
                n: p.n,
                k: p.k,
                bytes: p.bytes,
                spec_text: p.spec_text,
            });
        }
        let g = crate::gptq::geometry(self, prefix)?;
        Ok(QuantLayerInfo {
            prefix: prefix.to_owned(),
            format: self.config.describe(),
            n: g.n,
            k: g.k,
            bytes: g.bytes,
            spec_text: crate::gptq::spec_text(&self.config, g.act),
        })
    }

    /// Unpacks layer `prefix` into exact [`QuantizedWeights`] (see [`crate::gptq`],
    /// [`crate::compressed`] and [`crate::fp8_nvfp4`] for the layouts and the descriptors).
    ///
    /// # Errors
    /// As [`QuantizedCheckpoint::layer_info`]; [`Error::QuantValue`] when values contradict the
    /// settings (see [`crate::gptq`]); [`Error::Spec`] if the descriptor is refused (a group size
    /// the kernels do not take); [`Error::Weights`] if a scale is not finite.
    pub fn layer(&self, prefix: &str) -> Result<ImportedLayer> {
        if matches!(self.config.method, QuantMethod::Gptq | QuantMethod::Awq) {
            return crate::gptq::unpack(self, prefix);
        }
        let (p, parts) = self.plan(prefix, true)?;
        ImportedLayer::build(
            prefix,
            p.spec_text,
            (p.n, p.k),
            parts.expect("values asked for"),
            None,
        )
    }
}

impl ImportedLayer {
    /// Layer `prefix` from its descriptor text and its unpacked parts, checked by
    /// [`QuantizedWeights::from_parts_with_scale2`].
    pub(crate) fn build(
        prefix: &str,
        spec_text: String,
        (n, k): (usize, usize),
        (codes, scales, scale2, zeros): Parts,
        k_perm: Option<Vec<usize>>,
    ) -> Result<Self> {
        let spec = parse_kernel_str(&spec_text).map_err(|source| Error::Spec {
            spec: spec_text.clone(),
            source,
        })?;
        let weights =
            QuantizedWeights::from_parts_with_scale2(&spec, n, k, codes, scales, scale2, zeros)
                .map_err(|source| Error::Weights {
                    tensor: prefix.to_owned(),
                    source,
                })?;
        Ok(ImportedLayer {
            prefix: prefix.to_owned(),
            weights,
            spec_text,
            k_perm,
        })
    }
}

fn read_index(path: &Path) -> Result<BTreeMap<String, String>> {
    let io = |source| Error::Io {
        path: path.display().to_string(),
        source,
    };
    let text = std::fs::read_to_string(path).map_err(io)?;
    let json: serde_json::Value = serde_json::from_str(&text).map_err(|source| Error::Json {
        path: path.display().to_string(),
        source,
    })?;
    let bad = |msg: &str| Error::Folder {
        path: path.display().to_string(),
        msg: msg.to_owned(),
    };
    let map = json
        .get("weight_map")
        .and_then(|m| m.as_object())
        .ok_or_else(|| bad("no `weight_map` object"))?;
    map.iter()
        .map(|(k, v)| {
            let file = v
                .as_str()
                .ok_or_else(|| bad(&format!("`weight_map` entry `{k}` is not a file name")))?;
            if file.contains('/') || file.contains('\\') {
                return Err(bad(&format!(
                    "`weight_map` entry `{k}` names {file}, outside the folder"
                )));
            }
            Ok((k.clone(), file.to_owned()))
        })
        .collect()
}
