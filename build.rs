//! Target probing and feature checks only:
//!
//! * tells the crate whether it is being built for a Tegra-class target (aarch64 Linux), where
//!   native NvSci may exist, through the `nvsci_tegra_target` cfg;
//! * with the `cuda` feature, requires exactly one `cuda-*` version feature, and says how to pick
//!   one (cudarc cannot bind two CUDA versions, and needs one).

fn main() {
    println!("cargo:rustc-check-cfg=cfg(nvsci_tegra_target)");
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=NVSCI_LIB_DIR");
    let arch = std::env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if arch == "aarch64" && os == "linux" {
        println!("cargo:rustc-cfg=nvsci_tegra_target");
    }
    check_cuda_version_features();
}

/// Fails the build with an explanation unless the `cuda` feature comes with exactly one
/// `cuda-XXYY0` feature.
fn check_cuda_version_features() {
    if std::env::var_os("CARGO_FEATURE_CUDA").is_none() {
        return;
    }
    let mut versions: Vec<String> = std::env::vars()
        .filter_map(|(k, _)| k.strip_prefix("CARGO_FEATURE_CUDA_").map(|v| format!("cuda-{v}")))
        .collect();
    versions.sort();
    let how = "pick the CUDA version with one feature, for example\n  \
               nvsci = { version = \"0.1\", default-features = false, features = [\"mock\", \"cuda\", \"cuda-13000\"] }\n\
               (`default-features = false` because the default features include cuda-12060)";
    match versions.len() {
        1 => {}
        0 => panic!(
            "nvsci: the `cuda` feature needs one CUDA version feature (cuda-11040 ... cuda-13040); {how}"
        ),
        _ => panic!(
            "nvsci: the CUDA version features {} are enabled together, but cudarc binds exactly one CUDA \
             version; {how}",
            versions.join(", ")
        ),
    }
}
