//! Checks for the system C libraries the server links against, before rustc gets a chance to fail
//! with an obscure linker error.
//!
//! libespeak-ng (phonemization and the espeak engine) and libopus (the `opus` format, linked by
//! `audiopus_sys` through pkg-config) come from the system. LAME and FDK AAC need nothing: their
//! crates compile bundled sources. A missing library stops the build with the Debian package to
//! install; nothing silently falls back to a reduced feature set.

use std::path::Path;
use std::process::Command;

struct SystemLibrary {
    /// What the server uses it for, for the error message.
    purpose: &'static str,
    pkg_config_name: &'static str,
    /// Debian's libespeak-ng-dev ships no .pc file on some releases, so its header is accepted as
    /// proof of installation. libopus must be visible to pkg-config: that is how `audiopus_sys`
    /// finds it (without it, that crate would quietly try to build its own copy).
    header: Option<&'static str>,
    debian_package: &'static str,
}

const REQUIRED: [SystemLibrary; 2] = [
    SystemLibrary {
        purpose: "phonemization and the espeak engine",
        pkg_config_name: "espeak-ng",
        header: Some("/usr/include/espeak-ng/speak_lib.h"),
        debian_package: "libespeak-ng-dev",
    },
    SystemLibrary {
        purpose: "the `opus` response format",
        pkg_config_name: "opus",
        header: None,
        debian_package: "libopus-dev",
    },
];

/// `Some(found)` when pkg-config could be run, `None` when it is not installed.
fn pkg_config_has(name: &str) -> Option<bool> {
    Command::new("pkg-config")
        .args(["--exists", name])
        .status()
        .ok()
        .map(|status| status.success())
}

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_LIBDIR");

    let missing: Vec<&SystemLibrary> = REQUIRED
        .iter()
        .filter(|lib| {
            let via_pkg_config = pkg_config_has(lib.pkg_config_name) == Some(true);
            let via_header = lib.header.is_some_and(|header| Path::new(header).exists());
            !via_pkg_config && !via_header
        })
        .collect();

    if !missing.is_empty() {
        let mut message = String::from("missing system libraries:\n");
        for lib in &missing {
            message.push_str(&format!(
                "  - {} (needed for {}): install it with `apt-get install {}`\n",
                lib.pkg_config_name, lib.purpose, lib.debian_package
            ));
        }
        let packages: Vec<&str> = missing.iter().map(|lib| lib.debian_package).collect();
        message.push_str(&format!(
            "On Debian/Ubuntu: sudo apt-get install pkg-config {}",
            packages.join(" ")
        ));
        panic!("{message}");
    }
}
