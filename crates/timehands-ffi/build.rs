//! The shared library's name inside it, by which programs linked with it
//! load it: the crate's major version, so that they load the library of that
//! ABI, whatever minor version `make install` put beside it.
//!
//! - ELF systems (Linux, the BSDs): the SONAME `libtimehands.so.MAJOR`.
//! - Apple's: the install name `@rpath/libtimehands.MAJOR.dylib`, found
//!   through the program's rpath (`-Wl,-rpath,DIR`); `make install` rewrites
//!   it to the installed file's path.
//! - Windows (any OS but unix): nothing to name; the library is empty there,
//!   and this script says so (README.md, "Each OS").
fn main() {
    let major = env!("CARGO_PKG_VERSION_MAJOR");
    let family = std::env::var("CARGO_CFG_TARGET_FAMILY").unwrap_or_default();
    let vendor = std::env::var("CARGO_CFG_TARGET_VENDOR").unwrap_or_default();
    if vendor == "apple" {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-install_name,@rpath/libtimehands.{major}.dylib");
    } else if family.split(',').any(|f| f == "unix") {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libtimehands.so.{major}");
    } else {
        let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
        println!(
            "cargo:warning=libtimehands is empty on {os}: its API is clock_gettime(2)'s (clockid_t, struct timespec, errno), which {os} lacks; see crates/timehands-ffi/README.md"
        );
    }
    println!("cargo:rerun-if-changed=build.rs");
}
