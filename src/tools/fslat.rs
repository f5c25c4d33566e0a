//! fslat: how long a filesystem's own file operations take (read_iter, write_iter, open, fsync,
//! getattr), like libbpf-tools' fsdist, from one table of filesystems. Installed under the name
//! `<fs>lat` (ext4lat, xfslat, btrfslat, nfslat, f2fslat), the program's name chooses the
//! filesystem, as libbpf-tools' aliases do, also with a distribution's prefix (`bpf-xfslat`).

use anyhow::{anyhow, Result};

use crate::tools::fnlat::{g, Function, Layer, Op};

/// One filesystem's functions for read, write, open, fsync and getattr (empty where it has none).
struct Filesystem {
    name: &'static str,
    module: &'static str,
    read: &'static [Function],
    write: &'static [Function],
    open: &'static [Function],
    fsync: &'static [Function],
    getattr: &'static [Function],
}

const FILESYSTEMS: &[Filesystem] = &[
    Filesystem {
        name: "ext4",
        module: "ext4",
        read: &[g("ext4_file_read_iter")],
        write: &[g("ext4_file_write_iter")],
        open: &[g("ext4_file_open")],
        fsync: &[g("ext4_sync_file")],
        getattr: &[g("ext4_file_getattr")],
    },
    Filesystem {
        name: "xfs",
        module: "xfs",
        read: &[g("xfs_file_read_iter")],
        write: &[g("xfs_file_write_iter")],
        open: &[g("xfs_file_open")],
        fsync: &[g("xfs_file_fsync")],
        getattr: &[g("xfs_vn_getattr")],
    },
    Filesystem {
        name: "btrfs",
        module: "btrfs",
        read: &[g("btrfs_file_read_iter")],
        write: &[g("btrfs_file_write_iter")],
        open: &[g("btrfs_file_open")],
        fsync: &[g("btrfs_sync_file")],
        getattr: &[g("btrfs_getattr")],
    },
    Filesystem {
        name: "nfs",
        module: "nfs",
        read: &[g("nfs_file_read")],
        write: &[g("nfs_file_write")],
        open: &[g("nfs_file_open"), g("nfs4_file_open")],
        fsync: &[g("nfs_file_fsync")],
        getattr: &[g("nfs_getattr")],
    },
    Filesystem {
        name: "f2fs",
        module: "f2fs",
        read: &[g("f2fs_file_read_iter")],
        write: &[g("f2fs_file_write_iter")],
        open: &[g("f2fs_file_open")],
        fsync: &[g("f2fs_sync_file")],
        getattr: &[g("f2fs_getattr")],
    },
];

/// Filesystems fslat knows, for messages and `--fs`.
pub fn names() -> Vec<&'static str> {
    FILESYSTEMS.iter().map(|f| f.name).collect()
}

/// The filesystem types in /proc/self/mounts that the table has, in its order (iostack's and
/// the exporter's default).
pub fn mounted() -> Vec<String> {
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    let types: Vec<&str> = mounts
        .lines()
        .filter_map(|l| l.split_whitespace().nth(2))
        .collect();
    names()
        .into_iter()
        .filter(|fs| types.contains(fs))
        .map(String::from)
        .collect()
}

/// The layer for one filesystem: read, write, open, fsync, getattr.
pub fn layer(fs: &str) -> Result<Layer> {
    let f = FILESYSTEMS.iter().find(|f| f.name == fs).ok_or_else(|| {
        anyhow!(
            "unknown filesystem '{fs}': fslat knows {}",
            names().join(", ")
        )
    })?;
    let ops = vec![
        Op {
            name: "read",
            letter: 'R',
            functions: f.read,
        },
        Op {
            name: "write",
            letter: 'W',
            functions: f.write,
        },
        Op {
            name: "open",
            letter: 'O',
            functions: f.open,
        },
        Op {
            name: "fsync",
            letter: 'F',
            functions: f.fsync,
        },
        Op {
            name: "getattr",
            letter: 'G',
            functions: f.getattr,
        },
    ];
    Ok(Layer {
        what: f.name,
        module: Some(f.module),
        // One leak per run: a layer lives as long as the tool.
        ops: Vec::leak(ops),
    })
}

/// The filesystem a program name asks for: `ext4lat`, `bpf-xfslat`... (None: plain `fslat`).
pub fn from_program_name(program: &str) -> Option<&'static str> {
    let base = program.rsplit('/').next().unwrap_or(program);
    FILESYSTEMS
        .iter()
        .map(|f| f.name)
        .find(|fs| base.contains(&format!("{fs}lat")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn program_names_choose_the_filesystem() {
        assert_eq!(from_program_name("/usr/sbin/ext4lat"), Some("ext4"));
        assert_eq!(from_program_name("bpf-xfslat"), Some("xfs"));
        assert_eq!(from_program_name("f2fslat"), Some("f2fs"));
        assert_eq!(from_program_name("fslat"), None);
        assert_eq!(from_program_name("vfslat"), None);
    }

    #[test]
    fn the_installed_aliases_are_exactly_our_filesystems() {
        // scripts/aliases is what the install script and the packages link to fslat.
        let aliases: Vec<(&str, &str)> = include_str!("../../scripts/aliases")
            .lines()
            .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
            .map(|l| {
                let mut words = l.split_whitespace();
                (words.next().unwrap(), words.next().unwrap())
            })
            .collect();
        let expected: Vec<String> = names().iter().map(|fs| format!("{fs}lat")).collect();
        let listed: Vec<String> = aliases.iter().map(|(a, _)| a.to_string()).collect();
        assert_eq!(listed, expected);
        assert!(aliases.iter().all(|(a, t)| *t == "fslat"
            && from_program_name(a).map(|fs| format!("{fs}lat")) == Some(a.to_string())));
    }

    #[test]
    fn every_filesystem_has_its_five_operations() {
        for fs in names() {
            let l = layer(fs).unwrap();
            let ops: Vec<&str> = l.ops.iter().map(|o| o.name).collect();
            assert_eq!(ops, ["read", "write", "open", "fsync", "getattr"], "{fs}");
        }
        assert!(layer("zfs")
            .unwrap_err()
            .to_string()
            .contains("fslat knows ext4, xfs"));
    }
}
