//! Request operation and flag names, decoded from the running kernel's BTF enums (`req_op` /
//! `req_opf` and `req_flag_bits`) rather than a frozen copy of a header: bit positions moved
//! between kernels.

use crate::common::kernel::prober::Prober;

/// Flags worth showing, with their labels (bcc's wording); bit positions come from BTF.
const FLAG_LABELS: [(&str, &str); 11] = [
    ("__REQ_NOWAIT", "NoWait"),
    ("__REQ_BACKGROUND", "Background"),
    ("__REQ_RAHEAD", "ReadAhead"),
    ("__REQ_PREFLUSH", "PreFlush"),
    ("__REQ_FUA", "FUA"),
    ("__REQ_INTEGRITY", "Integrity"),
    ("__REQ_IDLE", "Idle"),
    ("__REQ_NOMERGE", "NoMerge"),
    ("__REQ_PRIO", "Priority"),
    ("__REQ_META", "Metadata"),
    ("__REQ_SYNC", "Sync"),
];

#[derive(Clone, Debug)]
pub struct RequestFlags {
    op_mask: u32,
    ops: Vec<(u32, String)>,
    flags: Vec<(u32, &'static str)>,
}

/// REQ_OP_WRITE_ZEROES -> WriteZeroes
fn camel(op: &str) -> String {
    op.trim_start_matches("REQ_OP_")
        .split('_')
        .map(|w| {
            let mut c = w.chars();
            match c.next() {
                Some(f) => f.to_ascii_uppercase().to_string() + &c.as_str().to_ascii_lowercase(),
                None => String::new(),
            }
        })
        .collect()
}

impl RequestFlags {
    pub fn from_btf(prober: &Prober) -> Option<RequestFlags> {
        let ops = prober.enum_values(&["req_op", "req_opf"])?;
        let bits = prober.enum_values(&["req_flag_bits"])?;
        Some(Self::from_enums(&ops, &bits))
    }

    pub fn from_enums(ops: &[(String, i128)], bits: &[(String, i128)]) -> RequestFlags {
        // The first flag bit sits just above the op field (REQ_OP_BITS).
        let op_bits = bits
            .iter()
            .find(|(n, _)| n == "__REQ_FAILFAST_DEV")
            .map(|(_, v)| *v as u32)
            .unwrap_or(8);
        let op_mask = (1u32 << op_bits) - 1;
        let ops = ops
            .iter()
            .filter(|(n, _)| n.starts_with("REQ_OP_") && n != "REQ_OP_LAST")
            .map(|(n, v)| (*v as u32, camel(n)))
            .collect();
        let flags = FLAG_LABELS
            .iter()
            .filter_map(|(name, label)| {
                let (_, bit) = bits.iter().find(|(n, _)| n == name)?;
                (*bit < 32).then_some((1u32 << *bit, *label))
            })
            .collect();
        RequestFlags {
            op_mask,
            ops,
            flags,
        }
    }

    /// What BPF keeps of cmd_flags for the op alone.
    pub fn op_mask(&self) -> u32 {
        self.op_mask
    }

    /// What BPF keeps of cmd_flags for `-F`: the op and the labelled flags.
    pub fn mask(&self) -> u32 {
        self.flags.iter().fold(self.op_mask, |m, (bit, _)| m | bit)
    }

    pub fn op_name(&self, cmd_flags: u32) -> String {
        let op = cmd_flags & self.op_mask;
        self.ops
            .iter()
            .find(|(v, _)| *v == op)
            .map(|(_, n)| n.clone())
            .unwrap_or_else(|| format!("Op{op}"))
    }

    /// bcc's `-F` label: flags then op, joined by '-' (e.g. `Sync-Write`).
    pub fn describe(&self, cmd_flags: u32) -> String {
        let mut parts: Vec<String> = self
            .flags
            .iter()
            .filter(|(bit, _)| cmd_flags & bit != 0)
            .map(|(_, l)| l.to_string())
            .collect();
        parts.push(self.op_name(cmd_flags));
        parts.join("-")
    }

    /// blktrace's RWBS letters, bcc biosnoop's `T` column: `F` for a preflush, the op (`R`,
    /// `W`, `D` discard, `DE` secure erase, `F` flush, `N` other), then `F` (FUA), `A`
    /// (readahead), `S` (sync), `M` (metadata), e.g. `WS`.
    pub fn rwbs(&self, cmd_flags: u32) -> String {
        let has = |label: &str| {
            self.flags
                .iter()
                .any(|(bit, l)| *l == label && cmd_flags & bit != 0)
        };
        let mut s = String::with_capacity(6);
        if has("PreFlush") {
            s.push('F');
        }
        s.push_str(match self.op_name(cmd_flags).as_str() {
            "Read" => "R",
            "Write" => "W",
            "Discard" => "D",
            "SecureErase" => "DE",
            "Flush" => "F",
            _ => "N",
        });
        for (label, letter) in [
            ("FUA", 'F'),
            ("ReadAhead", 'A'),
            ("Sync", 'S'),
            ("Metadata", 'M'),
        ] {
            if has(label) {
                s.push(letter);
            }
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> RequestFlags {
        let ops = vec![
            ("REQ_OP_READ".to_string(), 0),
            ("REQ_OP_WRITE".to_string(), 1),
            ("REQ_OP_FLUSH".to_string(), 2),
            ("REQ_OP_WRITE_ZEROES".to_string(), 9),
            ("REQ_OP_LAST".to_string(), 36),
        ];
        let bits = vec![
            ("__REQ_FAILFAST_DEV".to_string(), 8),
            ("__REQ_SYNC".to_string(), 11),
            ("__REQ_META".to_string(), 12),
            ("__REQ_FUA".to_string(), 17),
        ];
        RequestFlags::from_enums(&ops, &bits)
    }

    #[test]
    fn decodes_ops_and_flags() {
        let f = sample();
        assert_eq!(f.describe(1), "Write");
        assert_eq!(f.describe(1 | 1 << 11), "Sync-Write");
        assert_eq!(f.describe(1 | 1 << 11 | 1 << 17), "FUA-Sync-Write");
        assert_eq!(f.describe(9), "WriteZeroes");
        assert_eq!(f.describe(0), "Read");
        assert_eq!(f.mask(), 0xff | 1 << 11 | 1 << 12 | 1 << 17);
    }

    #[test]
    fn rwbs_letters_follow_blktrace() {
        let f = sample();
        assert_eq!(f.rwbs(1), "W");
        assert_eq!(f.rwbs(1 | 1 << 11), "WS");
        assert_eq!(f.rwbs(1 | 1 << 11 | 1 << 17), "WFS");
        assert_eq!(f.rwbs(1 << 12), "RM");
        assert_eq!(f.rwbs(2), "F");
        assert_eq!(f.rwbs(9), "N");
    }
}
