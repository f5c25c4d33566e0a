//! The tools, each a library component: a type with `plan`, `open` and `collect` (or `poll`), see
//! `common::run`. Its binary in `src/bin/` only parses the command line into the tool's
//! options and hands them to the runner; an all-layers view or an exporter uses the same types.
pub mod biolat;
pub mod bioslower;
pub mod exporter;
pub mod fnlat;
pub mod fslat;
pub mod iostack;
pub mod rastat;
pub mod syslat;
pub mod vfslat;
