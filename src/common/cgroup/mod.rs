//! cgroup v2: which cgroup to trace (`--cgroup`, `filter`), and whose a histogram is
//! (`--per-cgroup`, `names`: ids back to paths).

pub mod filter;
pub mod names;

pub use filter::{Cgroup2Mount, CgroupFilter};
pub use names::{per_cgroup_entries, CgroupNames, PER_CGROUP_ROOM};
