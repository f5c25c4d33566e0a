//! ext4lat: `fslat --fs ext4`, by its name (the same program as src/bin/fslat.rs).
include!("fslat.rs");
