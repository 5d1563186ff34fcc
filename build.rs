//! Target probing only: tells the crate whether it is being built for a Tegra-class target
//! (aarch64 Linux), where native NvSci may exist, through the `nvsci_tegra_target` cfg.

fn main() {
    println!("cargo:rustc-check-cfg=cfg(nvsci_tegra_target)");
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=NVSCI_LIB_DIR");
    let arch = std::env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if arch == "aarch64" && os == "linux" {
        println!("cargo:rustc-cfg=nvsci_tegra_target");
    }
}
