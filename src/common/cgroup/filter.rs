//! `--cgroup PATH`: trace only what belongs to one cgroup v2 and its descendants. The path is
//! resolved once, here, to what the kernel compares (`lib/cgroup.bpf.h`): the cgroup's id (on
//! cgroup2 the id is its directory's inode number) and its level, how deep it lies below the
//! hierarchy's root. A program takes a task's (or a bio's) cgroup, reads its ancestor at that
//! level, and compares the ids: a few loads, and no map.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use anyhow::{bail, Result};

/// The initial cgroup namespace's inode (PROC_CGROUP_INIT_INO in include/linux/proc_ns.h).
const INITIAL_CGROUP_NS: u64 = 0xEFFF_FFFB;

/// One cgroup v2, as the kernel knows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CgroupFilter {
    /// The directory, e.g. /sys/fs/cgroup/system.slice/postgresql.service.
    pub path: PathBuf,
    /// Its kernfs id: the directory's inode number.
    pub id: u64,
    /// 0 for the root, 1 for its children...
    pub level: u32,
    /// Whether its I/O carries it: the io controller is on the v2 hierarchy and enabled for
    /// this cgroup (it has io.stat; for the root, its children have), so its bios' blkcg is
    /// this cgroup or a descendant. Without (the io controller on v1, or not enabled here), a
    /// bio's blkcg says nothing about it.
    pub owns_its_io: bool,
}

/// Where the cgroup v2 hierarchy is mounted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cgroup2Mount {
    pub dir: PathBuf,
    /// The mount's root inside the hierarchy ("/" unless a subtree is mounted).
    pub root: String,
}

impl Cgroup2Mount {
    /// The first cgroup2 mount in /proc/self/mountinfo.
    pub fn find() -> Option<Cgroup2Mount> {
        Self::parse(&std::fs::read_to_string("/proc/self/mountinfo").ok()?)
    }

    /// From mountinfo lines: `ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS... - FSTYPE SOURCE ...`
    /// (spaces in paths are written `\040`).
    pub fn parse(mountinfo: &str) -> Option<Cgroup2Mount> {
        mountinfo.lines().find_map(|line| {
            let (fields, rest) = line.split_once(" - ")?;
            if rest.split_whitespace().next()? != "cgroup2" {
                return None;
            }
            let fields: Vec<&str> = fields.split_whitespace().collect();
            Some(Cgroup2Mount {
                root: unescape(fields.get(3)?),
                dir: PathBuf::from(unescape(fields.get(4)?)),
            })
        })
    }

    /// How deep the mount's own root lies in the hierarchy.
    fn root_level(&self) -> u32 {
        self.root.split('/').filter(|c| !c.is_empty()).count() as u32
    }
}

/// mountinfo's octal escapes (`\040` for a space).
fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\' {
            let digits: String = chars.clone().take(3).collect();
            if let Ok(v) = u8::from_str_radix(&digits, 8) {
                out.push(v as char);
                chars.nth(2);
                continue;
            }
        }
        out.push(c);
    }
    out
}

/// Whether this process sees the host's cgroup tree (not a container's cgroup namespace, where
/// the kernel hides how deep the namespace's root lies).
fn in_initial_cgroup_namespace() -> bool {
    std::fs::metadata("/proc/self/ns/cgroup").map_or(true, |m| m.ino() == INITIAL_CGROUP_NS)
}

impl CgroupFilter {
    /// `--cgroup PATH`: a directory under the cgroup2 mount, or a path relative to it
    /// (`system.slice/postgresql.service`).
    pub fn resolve(arg: &str) -> Result<CgroupFilter> {
        let Some(mount) = Cgroup2Mount::find() else {
            bail!(
                "--cgroup needs the cgroup v2 hierarchy, and none is mounted here (a cgroup v1-only \
                 host): mount it (`mount -t cgroup2 none /sys/fs/cgroup/unified`) and run the tasks \
                 in it, or trace them with -p"
            );
        };
        Self::resolve_in(arg, &mount, in_initial_cgroup_namespace())
    }

    /// The whole cgroup v2 hierarchy (what --per-cgroup splits without --cgroup).
    pub fn root() -> Result<CgroupFilter> {
        let Some(mount) = Cgroup2Mount::find() else {
            bail!("--per-cgroup needs the cgroup v2 hierarchy, and none is mounted here");
        };
        Self::resolve_in(&mount.dir.to_string_lossy(), &mount, true)
    }

    /// The same against a given mount (tests).
    pub fn resolve_in(arg: &str, mount: &Cgroup2Mount, host_view: bool) -> Result<CgroupFilter> {
        if !host_view {
            bail!(
                "--cgroup: this runs in a cgroup namespace of its own, which hides how deep its \
                 cgroups lie in the kernel's tree: run it in the host's (docker run --cgroupns=host, \
                 or nsenter --cgroup=/proc/1/ns/cgroup from the host)"
            );
        }
        let given = Path::new(arg);
        let path = if given.is_absolute() {
            given.to_path_buf()
        } else {
            mount.dir.join(given)
        };
        let mdir = mount.dir.display();
        let Ok(below) = path.strip_prefix(&mount.dir) else {
            bail!(
                "{arg} is not in the cgroup v2 hierarchy (mounted at {mdir}): give a path under \
                 it, or one relative to it (e.g. system.slice/cron.service)"
            );
        };
        let meta = match std::fs::metadata(&path) {
            Ok(m) => m,
            Err(_) => bail!(
                "no cgroup {} in the cgroup v2 hierarchy at {mdir} (see `ls {mdir}` or \
                 `systemd-cgls`)",
                path.display()
            ),
        };
        if !meta.is_dir() {
            bail!(
                "{} is a file, not a cgroup: give the cgroup's directory",
                path.display()
            );
        }
        let mut level = mount.root_level();
        for part in below.components() {
            match part {
                std::path::Component::Normal(_) => level += 1,
                std::path::Component::CurDir => {}
                _ => bail!("{arg}: give the cgroup's path without '..'"),
            }
        }
        Ok(CgroupFilter {
            owns_its_io: if below.as_os_str().is_empty() {
                // The mount's root: its children's I/O carries their blkcg.
                std::fs::read_to_string(path.join("cgroup.subtree_control"))
                    .is_ok_and(|c| c.split_whitespace().any(|w| w == "io"))
            } else {
                path.join("io.stat").exists()
            },
            path,
            id: meta.ino(),
            level,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOUNTINFO: &str = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
38 31 0:35 / /sys/fs/cgroup/blkio rw,relatime - cgroup cgroup rw,blkio
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";

    #[test]
    fn the_v2_mount_is_found_among_v1_ones() {
        let m = Cgroup2Mount::parse(MOUNTINFO).unwrap();
        assert_eq!(m.dir, Path::new("/sys/fs/cgroup/unified"));
        assert_eq!(m.root, "/");
        let v1_only: Vec<&str> = MOUNTINFO.lines().take(2).collect();
        assert_eq!(Cgroup2Mount::parse(&v1_only.join("\n")), None);
    }

    #[test]
    fn escaped_mount_points_are_read_back() {
        let line = "41 31 0:38 /a\\040b /mnt/my\\040cg rw - cgroup2 cgroup2 rw\n";
        let m = Cgroup2Mount::parse(line).unwrap();
        assert_eq!(m.dir, Path::new("/mnt/my cg"));
        assert_eq!((m.root.as_str(), m.root_level()), ("/a b", 1));
    }

    /// A directory tree standing in for a cgroup2 mount.
    fn fake_mount() -> (tempdir::Dir, Cgroup2Mount) {
        let dir = tempdir::Dir::new();
        std::fs::create_dir_all(dir.0.join("system.slice/db.service")).unwrap();
        std::fs::write(dir.0.join("cgroup.procs"), "").unwrap();
        let mount = Cgroup2Mount {
            dir: dir.0.clone(),
            root: "/".into(),
        };
        (dir, mount)
    }

    mod tempdir {
        pub struct Dir(pub std::path::PathBuf);
        impl Dir {
            pub fn new() -> Dir {
                let p = std::env::temp_dir().join(format!(
                    "iostack-cgroup-test.{}.{:?}",
                    std::process::id(),
                    std::thread::current().id()
                ));
                let _ = std::fs::remove_dir_all(&p);
                std::fs::create_dir_all(&p).unwrap();
                Dir(p)
            }
        }
        impl Drop for Dir {
            fn drop(&mut self) {
                let _ = std::fs::remove_dir_all(&self.0);
            }
        }
    }

    #[test]
    fn relative_and_absolute_paths_name_the_same_cgroup_and_level() {
        let (_d, mount) = fake_mount();
        let rel = CgroupFilter::resolve_in("system.slice/db.service", &mount, true).unwrap();
        let abs = mount.dir.join("system.slice/db.service");
        let abs = CgroupFilter::resolve_in(abs.to_str().unwrap(), &mount, true).unwrap();
        assert_eq!(rel, abs);
        assert_eq!(rel.level, 2);
        let meta = std::fs::metadata(&rel.path).unwrap();
        assert_eq!(rel.id, meta.ino());
        let root = CgroupFilter::resolve_in(mount.dir.to_str().unwrap(), &mount, true).unwrap();
        assert_eq!(root.level, 0);
        assert!(!root.owns_its_io);
        std::fs::write(mount.dir.join("system.slice/db.service/io.stat"), "").unwrap();
        let db = CgroupFilter::resolve_in("system.slice/db.service", &mount, true).unwrap();
        assert!(
            db.owns_its_io,
            "io.stat: the io controller is enabled there"
        );
    }

    #[test]
    fn bad_paths_are_refused_in_one_line_that_says_what_to_do() {
        let (_d, mount) = fake_mount();
        for (arg, says) in [
            ("system.slice/nope.service", "no cgroup"),
            ("cgroup.procs", "is a file, not a cgroup"),
            (
                "/sys/fs/cgroup/blkio/x",
                "is not in the cgroup v2 hierarchy",
            ),
            ("system.slice/../system.slice", "without '..'"),
        ] {
            let err = CgroupFilter::resolve_in(arg, &mount, true)
                .unwrap_err()
                .to_string();
            assert!(err.contains(says) && !err.contains('\n'), "{arg}: {err}");
        }
        let err = CgroupFilter::resolve_in("system.slice", &mount, false)
            .unwrap_err()
            .to_string();
        assert!(err.contains("--cgroupns=host"), "{err}");
    }
}
