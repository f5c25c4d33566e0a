//! `--per-cgroup DEPTH`: the kernel counts under a cgroup's id (its ancestor's at DEPTH, see
//! `src/bpf/lib/per_cgroup.bpf.h`); a person reads its path. The ids are the directories'
//! inode numbers under the cgroup2 mount, walked to DEPTH once, and again when an id is new.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use crate::common::cgroup::Cgroup2Mount;

/// How many cgroups' histograms a tool keeps room for in each report; events of cgroups beyond
/// are shown as `other`, never lost.
pub const PER_CGROUP_ROOM: u32 = 64;

/// The most histograms a per-cgroup map holds, whatever else splits them (a per-CPU histogram
/// is 2.8 KB a CPU, preallocated: 2048 are 11.6 MB on 2 CPUs).
pub const MAX_CGROUP_HISTOGRAMS: u32 = 2048;

/// Entries of a per-cgroup map whose cgroups each have `per_cgroup` histograms (ops, disks...),
/// for both generations of the double buffer.
pub fn per_cgroup_entries(per_cgroup: u32) -> u32 {
    (2 * PER_CGROUP_ROOM * per_cgroup.max(1)).min(MAX_CGROUP_HISTOGRAMS)
}

/// The label of events no cgroup histogram had room for.
pub const OTHER: &str = "other";

/// Cgroup ids to paths, e.g. `/system.slice/nginx.service`.
pub struct CgroupNames {
    mount: Option<Cgroup2Mount>,
    depth: u32,
    paths: HashMap<u64, String>,
}

impl CgroupNames {
    /// The cgroups down to `depth` levels below the root, as they are now.
    pub fn new(depth: u32) -> CgroupNames {
        let mut names = CgroupNames {
            mount: Cgroup2Mount::find(),
            depth,
            paths: HashMap::new(),
        };
        names.walk();
        names
    }

    /// The path of cgroup `id`; a cgroup made since the last walk is found by walking again,
    /// one removed since is `cgroup ID (removed)`.
    pub fn name(&mut self, id: u64) -> String {
        if !self.paths.contains_key(&id) {
            self.walk();
        }
        self.paths
            .get(&id)
            .cloned()
            .unwrap_or_else(|| format!("cgroup {id} (removed)"))
    }

    fn walk(&mut self) {
        let Some(mount) = &self.mount else { return };
        let root = mount.root.trim_end_matches('/').to_string();
        let below = self
            .depth
            .saturating_sub(mount.root.split('/').filter(|c| !c.is_empty()).count() as u32);
        let mut paths = HashMap::new();
        visit(&mount.dir, &root, below, &mut paths);
        self.paths = paths;
    }
}

/// Records `dir` as `path` (`/` for the root) and its subdirectories `levels` deep.
fn visit(dir: &Path, path: &str, levels: u32, out: &mut HashMap<u64, String>) {
    let Ok(meta) = std::fs::metadata(dir) else {
        return;
    };
    out.insert(
        meta.ino(),
        if path.is_empty() {
            "/".into()
        } else {
            path.into()
        },
    );
    if levels == 0 {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            let name = entry.file_name();
            let child = format!("{path}/{}", name.to_string_lossy());
            visit(&entry.path(), &child, levels - 1, out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_named_by_their_path_below_the_root_down_to_the_depth() {
        let dir = std::env::temp_dir().join(format!("iostack-names-test.{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("system.slice/db.service/inner")).unwrap();
        let ino = |p: &str| std::fs::metadata(dir.join(p)).unwrap().ino();
        let mut names = CgroupNames {
            mount: Some(Cgroup2Mount {
                dir: dir.clone(),
                root: "/".into(),
            }),
            depth: 2,
            paths: HashMap::new(),
        };
        names.walk();
        assert_eq!(names.name(ino("")), "/");
        assert_eq!(names.name(ino("system.slice")), "/system.slice");
        assert_eq!(
            names.name(ino("system.slice/db.service")),
            "/system.slice/db.service"
        );
        // Deeper than DEPTH: never a key (the kernel counts it under its ancestor).
        let inner = ino("system.slice/db.service/inner");
        assert_eq!(names.name(inner), format!("cgroup {inner} (removed)"));
        std::fs::create_dir(dir.join("late")).unwrap();
        assert_eq!(
            names.name(ino("late")),
            "/late",
            "a new cgroup is found by walking again"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
