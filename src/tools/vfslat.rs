//! vfslat: how long each VFS operation takes (read, write, fsync, open, create, unlink, mkdir,
//! rmdir, getattr), optionally per filesystem type: the layer between the system call and the
//! filesystem. A table for the fnlat engine.

use crate::tools::fnlat::{f, g, Layer, Op};

/// The VFS entry points, per operation (those this kernel has are timed; `--explain` lists the
/// rest with the reason).
pub const VFS: Layer = Layer {
    what: "VFS",
    module: None,
    ops: &[
        Op {
            name: "read",
            letter: 'R',
            functions: &[f("vfs_read", 3), f("vfs_readv", 3), f("vfs_iter_read", 2)],
        },
        Op {
            name: "write",
            letter: 'W',
            functions: &[
                f("vfs_write", 3),
                f("vfs_writev", 3),
                f("vfs_iter_write", 2),
            ],
        },
        Op {
            name: "fsync",
            letter: 'F',
            functions: &[g("vfs_fsync_range")],
        },
        Op {
            name: "open",
            letter: 'O',
            functions: &[g("vfs_open")],
        },
        Op {
            name: "create",
            letter: 'C',
            functions: &[g("vfs_create")],
        },
        Op {
            name: "unlink",
            letter: 'U',
            functions: &[g("vfs_unlink")],
        },
        Op {
            name: "mkdir",
            letter: 'M',
            functions: &[g("vfs_mkdir")],
        },
        Op {
            name: "rmdir",
            letter: 'D',
            functions: &[g("vfs_rmdir")],
        },
        Op {
            name: "getattr",
            letter: 'G',
            functions: &[g("vfs_getattr")],
        },
    ],
};
