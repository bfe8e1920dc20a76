//! Finding every `gemm!` invocation of a crate.
//!
//! The scanner reads the crate's sources the way rustc finds them: it starts at the crate roots
//! (`src/lib.rs`, `src/main.rs`, `src/bin/*.rs`, `src/bin/*/main.rs`) and follows the module tree —
//! inline `mod a { .. }`, `mod x;` resolved to `x.rs` or `x/mod.rs`, and `#[path = ".."]` — with the
//! same directory rules as rustc. It also reads every `.rs` file under `tests/`, `examples/` and
//! `benches/` (recursively), each as a root of its own.
//!
//! A macro call whose path ends in `gemm` (`gemm!`, `humming::gemm!`, `crate::gemm!`) is parsed with
//! [`humming_spec::parse_kernels`]. A `gemm!` nested in the tokens of another macro call
//! (`vec![..]`, `lazy_static! { .. }`, a `macro_rules!` body) is found too, as long as its body is
//! concrete Rust tokens.
//!
//! The scanner is deliberately forgiving, because the `gemm!` macro itself reports every problem with
//! precise spans: a file that cannot be read or parsed is skipped, a `mod x;` whose file does not
//! exist is ignored, and a declaration that does not validate is left out. Modules under a `#[cfg]`
//! that is off are scanned anyway (compiling a kernel that is not used costs time, not correctness).

use humming_spec::KernelSpec;
use proc_macro2::{TokenStream, TokenTree};
use std::collections::HashSet;
use std::fs;
use std::path::{Path, PathBuf};
use syn::visit::Visit;

/// One valid kernel declaration found in the sources.
#[derive(Clone, Debug)]
pub struct FoundKernel {
    /// The kernel's type name as declared (`W4A16G128`).
    pub name: String,
    /// Its validated spec.
    pub spec: KernelSpec,
    /// The file the declaration is in.
    pub file: PathBuf,
}

/// Everything a scan saw.
#[derive(Clone, Debug, Default)]
pub struct ScanResult {
    /// Files that were read (parsed or not), in scan order, each once.
    pub files: Vec<PathBuf>,
    /// Files that could not be read or did not parse as Rust; they were skipped.
    pub skipped: Vec<PathBuf>,
    /// The scanned directories that exist (`src`, `tests`, `examples`, `benches`).
    pub dirs: Vec<PathBuf>,
    /// Valid kernel declarations, in scan order (not deduplicated).
    pub kernels: Vec<FoundKernel>,
    /// Kernel declarations that did not parse or validate (the macro reports them).
    pub invalid: usize,
}

/// The folders scanned recursively, each `.rs` file as a root.
pub const TARGET_DIRS: [&str; 3] = ["tests", "examples", "benches"];

/// Scans the crate whose manifest folder is `root`, plus the `extra` root files (with their module
/// trees), leaving out every file under one of the `exclude` paths (files or folders). Relative
/// paths are relative to `root`. Never fails: what cannot be read is listed in
/// [`ScanResult::skipped`] or ignored.
pub fn scan_crate(root: &Path, extra: &[PathBuf], exclude: &[PathBuf]) -> ScanResult {
    let mut scanner = Scanner {
        exclude: exclude
            .iter()
            .map(|p| {
                let p = root.join(p);
                fs::canonicalize(&p).unwrap_or(p)
            })
            .collect(),
        ..Scanner::default()
    };
    let src = root.join("src");
    if src.is_dir() {
        scanner.result.dirs.push(src.clone());
    }
    let mut roots = vec![src.join("lib.rs"), src.join("main.rs")];
    let bin = src.join("bin");
    for entry in sorted_entries(&bin) {
        if entry.is_file() && entry.extension().is_some_and(|e| e == "rs") {
            roots.push(entry);
        } else if entry.is_dir() && entry.join("main.rs").is_file() {
            roots.push(entry.join("main.rs"));
        }
    }
    roots.extend(extra.iter().map(|p| root.join(p)));
    for dir in TARGET_DIRS {
        let dir = root.join(dir);
        if dir.is_dir() {
            scanner.result.dirs.push(dir.clone());
            collect_rs_files(&dir, &mut roots, 0);
        }
    }
    for file in roots {
        if file.is_file() {
            scanner.scan_root(&file);
        }
    }
    scanner.result
}

/// The entries of a folder, sorted by name; empty if it cannot be read.
fn sorted_entries(dir: &Path) -> Vec<PathBuf> {
    let mut entries: Vec<PathBuf> = match fs::read_dir(dir) {
        Ok(rd) => rd.filter_map(|e| e.ok().map(|e| e.path())).collect(),
        Err(_) => return Vec::new(),
    };
    entries.sort();
    entries
}

/// Appends every `.rs` file under `dir` (recursively, sorted, not following links to folders).
fn collect_rs_files(dir: &Path, out: &mut Vec<PathBuf>, depth: usize) {
    if depth > 32 {
        return;
    }
    for path in sorted_entries(dir) {
        let is_link = fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_symlink());
        if path.is_dir() {
            if !is_link {
                collect_rs_files(&path, out, depth + 1);
            }
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Where the children of the module being visited live, with rustc's rules: `dir` is the folder
/// that `mod x;` and `#[path]` resolve against; `relative` is the module name a non-`mod.rs` file
/// adds in front of its children (`src/a.rs`: `mod b;` is `src/a/b.rs`).
#[derive(Clone, Debug)]
struct ModDir {
    dir: PathBuf,
    relative: Option<String>,
}

impl ModDir {
    /// The folder of the children, including the pending relative component.
    fn children(&self) -> PathBuf {
        match &self.relative {
            Some(r) => self.dir.join(r),
            None => self.dir.clone(),
        }
    }
}

#[derive(Default)]
struct Scanner {
    result: ScanResult,
    seen: HashSet<PathBuf>,
    exclude: Vec<PathBuf>,
    queue: Vec<(PathBuf, ModDir)>,
}

impl Scanner {
    /// Scans one crate root (or a test/example/bench file) and every module file it reaches.
    fn scan_root(&mut self, file: &Path) {
        let dir = file.parent().map(Path::to_path_buf).unwrap_or_default();
        self.queue.push((
            file.to_path_buf(),
            ModDir {
                dir,
                relative: None,
            },
        ));
        while let Some((file, moddir)) = self.queue.pop() {
            self.scan_file(&file, moddir);
        }
    }

    fn scan_file(&mut self, file: &Path, moddir: ModDir) {
        let key = fs::canonicalize(file).unwrap_or_else(|_| file.to_path_buf());
        if self.exclude.iter().any(|ex| key.starts_with(ex)) || !self.seen.insert(key) {
            return;
        }
        self.result.files.push(file.to_path_buf());
        let parsed = fs::read_to_string(file)
            .ok()
            .and_then(|text| syn::parse_file(&text).ok());
        let Some(ast) = parsed else {
            self.result.skipped.push(file.to_path_buf());
            return;
        };
        let mut visitor = FileVisitor {
            scanner: self,
            file,
            stack: vec![moddir],
            pending: Vec::new(),
        };
        visitor.visit_file(&ast);
        // Children are visited in source order: the queue is a stack, so push them reversed.
        let pending = std::mem::take(&mut visitor.pending);
        self.queue.extend(pending.into_iter().rev());
    }

    fn add_invocation(&mut self, tokens: TokenStream, file: &Path) {
        let Ok(kernels) = humming_spec::parse_kernels(tokens) else {
            self.result.invalid += 1;
            return;
        };
        for k in kernels {
            match k.spec {
                Ok(spec) => self.result.kernels.push(FoundKernel {
                    name: k.decl.name.to_string(),
                    spec,
                    file: file.to_path_buf(),
                }),
                Err(_) => self.result.invalid += 1,
            }
        }
    }
}

struct FileVisitor<'s, 'f> {
    scanner: &'s mut Scanner,
    file: &'f Path,
    stack: Vec<ModDir>,
    pending: Vec<(PathBuf, ModDir)>,
}

/// The value of a `#[path = "..."]` attribute, if any.
fn path_attr(attrs: &[syn::Attribute]) -> Option<String> {
    attrs.iter().find_map(|attr| match &attr.meta {
        syn::Meta::NameValue(nv) if nv.path.is_ident("path") => match &nv.value {
            syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(s),
                ..
            }) => Some(s.value()),
            _ => None,
        },
        _ => None,
    })
}

/// True if a macro path names `gemm` (its last segment).
fn is_gemm_path(path: &syn::Path) -> bool {
    path.segments.last().is_some_and(|s| s.ident == "gemm")
}

impl FileVisitor<'_, '_> {
    fn current(&self) -> ModDir {
        // The stack always holds the file's own entry; the fallback is never used.
        self.stack.last().cloned().unwrap_or(ModDir {
            dir: PathBuf::new(),
            relative: None,
        })
    }

    /// Resolves `mod name;` (with an optional `#[path]`) to its file and the module folder of that file.
    fn resolve_out_of_line(&self, name: &str, path: Option<String>) -> Option<(PathBuf, ModDir)> {
        let cur = self.current();
        if let Some(p) = path {
            // `#[path]` is relative to the folder of the current file (or of the enclosing inline
            // modules), even in a non-`mod.rs` file; the file found acts like a `mod.rs`.
            let file = cur.dir.join(p);
            let dir = file.parent().map(Path::to_path_buf).unwrap_or_default();
            return Some((
                file,
                ModDir {
                    dir,
                    relative: None,
                },
            ));
        }
        let base = cur.children();
        let flat = base.join(format!("{name}.rs"));
        if flat.is_file() {
            return Some((
                flat,
                ModDir {
                    dir: base,
                    relative: Some(name.to_string()),
                },
            ));
        }
        let nested = base.join(name).join("mod.rs");
        if nested.is_file() {
            return Some((
                nested,
                ModDir {
                    dir: base.join(name),
                    relative: None,
                },
            ));
        }
        None
    }

    /// Finds `gemm!` calls in the tokens of another macro call.
    fn scan_tokens(&mut self, tokens: TokenStream) {
        let trees: Vec<TokenTree> = tokens.into_iter().collect();
        let mut i = 0;
        while i < trees.len() {
            if let (TokenTree::Ident(id), Some(TokenTree::Punct(bang)), Some(TokenTree::Group(g))) =
                (&trees[i], trees.get(i + 1), trees.get(i + 2))
            {
                let after_dollar =
                    i > 0 && matches!(&trees[i - 1], TokenTree::Punct(p) if p.as_char() == '$');
                if *id == "gemm" && bang.as_char() == '!' && !after_dollar {
                    self.scanner.add_invocation(g.stream(), self.file);
                    i += 3;
                    continue;
                }
            }
            if let TokenTree::Group(g) = &trees[i] {
                self.scan_tokens(g.stream());
            }
            i += 1;
        }
    }
}

impl<'ast> Visit<'ast> for FileVisitor<'_, '_> {
    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        let name = m.ident.to_string();
        let name = name.strip_prefix("r#").unwrap_or(&name).to_string();
        let path = path_attr(&m.attrs);
        if m.content.is_some() {
            let cur = self.current();
            let dir = match path {
                // For an inline module, `#[path]` names its folder, relative to the current one.
                Some(p) => cur.dir.join(p),
                None => cur.children().join(&name),
            };
            self.stack.push(ModDir {
                dir,
                relative: None,
            });
            syn::visit::visit_item_mod(self, m);
            self.stack.pop();
        } else if let Some(child) = self.resolve_out_of_line(&name, path) {
            self.pending.push(child);
        }
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        if is_gemm_path(&mac.path) {
            self.scanner.add_invocation(mac.tokens.clone(), self.file);
        } else {
            self.scan_tokens(mac.tokens.clone());
        }
    }
}
