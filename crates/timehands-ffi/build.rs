//! The shared library's name inside it, by which programs linked with it
//! load it: the crate's major version, so that they load the library of that
//! ABI, whatever minor version `make install` put beside it.
//!
//! - ELF systems (Linux, the BSDs): the SONAME `libtimehands.so.MAJOR`.
//! - Apple's: the install name `@rpath/libtimehands.MAJOR.dylib`, found
//!   through the program's rpath (`-Wl,-rpath,DIR`); `make install` rewrites
//!   it to the installed file's path.
//! - Windows: nothing; the library does not build there (README.md).
fn main() {
    let major = env!("CARGO_PKG_VERSION_MAJOR");
    let family = std::env::var("CARGO_CFG_TARGET_FAMILY").unwrap_or_default();
    let vendor = std::env::var("CARGO_CFG_TARGET_VENDOR").unwrap_or_default();
    if vendor == "apple" {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-install_name,@rpath/libtimehands.{major}.dylib");
    } else if family.split(',').any(|f| f == "unix") {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libtimehands.so.{major}");
    }
    println!("cargo:rerun-if-changed=build.rs");
}
