//! The committed SPIR-V is what scripts/build-vulkan-shaders makes from shaders/*.comp today
//! (so a shader edit without a rebuild fails here), and the crate includes every file of it.

use std::path::Path;
use std::process::Command;

fn spirv_dir() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/spirv"))
}

fn listed(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".spv"))
        .collect();
    names.sort();
    names
}

#[test]
fn every_committed_shader_is_included() {
    let mut included: Vec<String> = ggml_vulkan::shader_names()
        .iter()
        .map(|n| format!("{n}.spv"))
        .collect();
    included.sort();
    assert_eq!(listed(spirv_dir()), included);
}

#[test]
fn committed_spirv_matches_the_shader_sources() {
    if Command::new("glslc").arg("--version").output().is_err() {
        test_fixtures::skip("glslc is not installed (Debian's glslc package)");
        return;
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = std::env::temp_dir().join(format!("vk-spirv-{}", std::process::id()));
    let o = Command::new("bash")
        .arg(root.join("scripts/build-vulkan-shaders"))
        .arg(&out)
        .output()
        .expect("run scripts/build-vulkan-shaders");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(listed(&out), listed(spirv_dir()));
    for name in listed(&out) {
        let fresh = std::fs::read(out.join(&name)).unwrap();
        let committed = std::fs::read(spirv_dir().join(&name)).unwrap();
        assert!(
            fresh == committed,
            "spirv/{name} is stale: run scripts/build-vulkan-shaders"
        );
    }
    let _ = std::fs::remove_dir_all(&out);
}
