//! PTX special registers (PTX ISA chapter 10): every read-only register
//! the manual lists, with its type and whether it has `.x`/`.y`/`.z`
//! components.

use crate::ast::ScalarType;

/// A special register (`%tid`, `%laneid`, `%clock64`, ...).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SpecialRegister {
    /// `%tid`: thread identifier within a CTA (`.v4.u32`, `.x`/`.y`/`.z`).
    Tid,
    /// `%ntid`: number of threads in a CTA.
    Ntid,
    /// `%laneid`: lane identifier.
    Laneid,
    /// `%warpid`: warp identifier.
    Warpid,
    /// `%nwarpid`: number of warp identifiers.
    Nwarpid,
    /// `%ctaid`: CTA identifier within a grid.
    Ctaid,
    /// `%nctaid`: number of CTA ids per grid.
    Nctaid,
    /// `%smid`: SM identifier.
    Smid,
    /// `%nsmid`: number of SM identifiers.
    Nsmid,
    /// `%gridid`: grid identifier.
    Gridid,
    /// `%is_explicit_cluster`: whether the cluster launch was explicit.
    IsExplicitCluster,
    /// `%clusterid`: cluster identifier within a grid.
    Clusterid,
    /// `%nclusterid`: number of cluster identifiers per grid.
    Nclusterid,
    /// `%cluster_ctaid`: CTA identifier within a cluster.
    ClusterCtaid,
    /// `%cluster_nctaid`: number of CTA identifiers per cluster.
    ClusterNctaid,
    /// `%cluster_ctarank`: CTA rank within a cluster.
    ClusterCtarank,
    /// `%cluster_nctarank`: number of CTAs in a cluster.
    ClusterNctarank,
    /// `%lanemask_eq`: the bit of this lane.
    LanemaskEq,
    /// `%lanemask_le`: bits of lanes ≤ this one.
    LanemaskLe,
    /// `%lanemask_lt`: bits of lanes < this one.
    LanemaskLt,
    /// `%lanemask_ge`: bits of lanes ≥ this one.
    LanemaskGe,
    /// `%lanemask_gt`: bits of lanes > this one.
    LanemaskGt,
    /// `%clock`: 32-bit cycle counter.
    Clock,
    /// `%clock_hi`: upper 32 bits of `%clock64`.
    ClockHi,
    /// `%clock64`: 64-bit cycle counter.
    Clock64,
    /// `%pm0`..`%pm7`: 32-bit performance counters.
    Pm(u8),
    /// `%pm0_64`..`%pm7_64`: 64-bit performance counters.
    Pm64(u8),
    /// `%envreg0`..`%envreg31`: driver-defined read-only registers.
    Envreg(u8),
    /// `%globaltimer`: 64-bit nanosecond timer.
    Globaltimer,
    /// `%globaltimer_lo`: low 32 bits of `%globaltimer`.
    GlobaltimerLo,
    /// `%globaltimer_hi`: high 32 bits of `%globaltimer`.
    GlobaltimerHi,
    /// `%reserved_smem_offset_begin`.
    ReservedSmemOffsetBegin,
    /// `%reserved_smem_offset_end`.
    ReservedSmemOffsetEnd,
    /// `%reserved_smem_offset_cap`.
    ReservedSmemOffsetCap,
    /// `%reserved_smem_offset_0`, `%reserved_smem_offset_1`.
    ReservedSmemOffset(u8),
    /// `%total_smem_size`: shared memory allocated per CTA.
    TotalSmemSize,
    /// `%aggr_smem_size`: total shared memory including reserved.
    AggrSmemSize,
    /// `%dynamic_smem_size`: dynamic shared memory per CTA.
    DynamicSmemSize,
    /// `%current_graph_exec`: handle of the executing CUDA graph.
    CurrentGraphExec,
}

impl SpecialRegister {
    /// The register named `name` (with the `%`), if it is one.
    pub fn from_name(name: &str) -> Option<Self> {
        use SpecialRegister::*;
        let n = name.strip_prefix('%')?;
        Some(match n {
            "tid" => Tid,
            "ntid" => Ntid,
            "laneid" => Laneid,
            "warpid" => Warpid,
            "nwarpid" => Nwarpid,
            "ctaid" => Ctaid,
            "nctaid" => Nctaid,
            "smid" => Smid,
            "nsmid" => Nsmid,
            "gridid" => Gridid,
            "is_explicit_cluster" => IsExplicitCluster,
            "clusterid" => Clusterid,
            "nclusterid" => Nclusterid,
            "cluster_ctaid" => ClusterCtaid,
            "cluster_nctaid" => ClusterNctaid,
            "cluster_ctarank" => ClusterCtarank,
            "cluster_nctarank" => ClusterNctarank,
            "lanemask_eq" => LanemaskEq,
            "lanemask_le" => LanemaskLe,
            "lanemask_lt" => LanemaskLt,
            "lanemask_ge" => LanemaskGe,
            "lanemask_gt" => LanemaskGt,
            "clock" => Clock,
            "clock_hi" => ClockHi,
            "clock64" => Clock64,
            "globaltimer" => Globaltimer,
            "globaltimer_lo" => GlobaltimerLo,
            "globaltimer_hi" => GlobaltimerHi,
            "reserved_smem_offset_begin" => ReservedSmemOffsetBegin,
            "reserved_smem_offset_end" => ReservedSmemOffsetEnd,
            "reserved_smem_offset_cap" => ReservedSmemOffsetCap,
            "total_smem_size" => TotalSmemSize,
            "aggr_smem_size" => AggrSmemSize,
            "dynamic_smem_size" => DynamicSmemSize,
            "current_graph_exec" => CurrentGraphExec,
            _ => return numbered(n),
        })
    }

    /// The register's type (of each component for vector registers).
    pub fn ty(self) -> ScalarType {
        use SpecialRegister::*;
        match self {
            Gridid | Clock64 | Pm64(_) | Globaltimer | CurrentGraphExec => ScalarType::U64,
            IsExplicitCluster => ScalarType::Pred,
            Envreg(_)
            | ReservedSmemOffsetBegin
            | ReservedSmemOffsetEnd
            | ReservedSmemOffsetCap
            | ReservedSmemOffset(_) => ScalarType::B32,
            _ => ScalarType::U32,
        }
    }

    /// Whether the register is a vector read through `.x`, `.y`, `.z`.
    pub fn has_components(self) -> bool {
        use SpecialRegister::*;
        matches!(self, Tid | Ntid | Ctaid | Nctaid | Clusterid | Nclusterid | ClusterCtaid | ClusterNctaid)
    }

    /// Every special register (for documentation and tests).
    pub fn all() -> Vec<SpecialRegister> {
        use SpecialRegister::*;
        let mut v = vec![
            Tid,
            Ntid,
            Laneid,
            Warpid,
            Nwarpid,
            Ctaid,
            Nctaid,
            Smid,
            Nsmid,
            Gridid,
            IsExplicitCluster,
            Clusterid,
            Nclusterid,
            ClusterCtaid,
            ClusterNctaid,
            ClusterCtarank,
            ClusterNctarank,
            LanemaskEq,
            LanemaskLe,
            LanemaskLt,
            LanemaskGe,
            LanemaskGt,
            Clock,
            ClockHi,
            Clock64,
        ];
        v.extend((0..8).map(Pm));
        v.extend((0..8).map(Pm64));
        v.extend((0..32).map(Envreg));
        v.extend([
            Globaltimer,
            GlobaltimerLo,
            GlobaltimerHi,
            ReservedSmemOffsetBegin,
            ReservedSmemOffsetEnd,
            ReservedSmemOffsetCap,
            ReservedSmemOffset(0),
            ReservedSmemOffset(1),
            TotalSmemSize,
            AggrSmemSize,
            DynamicSmemSize,
            CurrentGraphExec,
        ]);
        v
    }

    /// The PTX name, with the `%`.
    pub fn name(self) -> String {
        use SpecialRegister::*;
        match self {
            Pm(i) => format!("%pm{i}"),
            Pm64(i) => format!("%pm{i}_64"),
            Envreg(i) => format!("%envreg{i}"),
            ReservedSmemOffset(i) => format!("%reserved_smem_offset_{i}"),
            other => {
                // The variant name in snake case (`ClockHi` → `%clock_hi`).
                let s = format!("{other:?}");
                let mut out = String::from("%");
                for (k, c) in s.char_indices() {
                    if c.is_ascii_uppercase() && k > 0 {
                        out.push('_');
                    }
                    out.push(c.to_ascii_lowercase());
                }
                out
            }
        }
    }
}

fn numbered(n: &str) -> Option<SpecialRegister> {
    let idx = |digits: &str, max: u8| {
        digits.parse::<u8>().ok().filter(|&i| i < max && (digits == "0" || !digits.starts_with('0')))
    };
    if let Some(d) = n.strip_prefix("envreg") {
        return idx(d, 32).map(SpecialRegister::Envreg);
    }
    if let Some(d) = n.strip_prefix("reserved_smem_offset_") {
        return idx(d, 2).map(SpecialRegister::ReservedSmemOffset);
    }
    if let Some(d) = n.strip_prefix("pm") {
        if let Some(d) = d.strip_suffix("_64") {
            return idx(d, 8).map(SpecialRegister::Pm64);
        }
        return idx(d, 8).map(SpecialRegister::Pm);
    }
    None
}
