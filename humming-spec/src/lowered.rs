//! One kernel's derived facts, computed once from its [`KernelSpec`] ([`KernelSpec::lower`]): where
//! the scales apply and in which dtype, the activations' codes and groups, the float weights' shifts,
//! the tiles it is compiled with. The code generator and the runtime's packer read this value rather
//! than asking `layout` again for each fact; the rules behind each field are `layout`'s and `tiles`'
//! functions, named in the field docs.

use crate::dtype::DType;
use crate::layout;
use crate::model::*;

/// The derived facts of one kernel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lowered {
    /// The spec they are derived from.
    pub spec: KernelSpec,
    /// A is 8-bit codes with a scale per row or group ([`layout::is_8bit_activation`]).
    pub act8: bool,
    /// Bytes of one element of A in the kernel ([`layout::a_bytes`]).
    pub a_bytes: u32,
    /// FP8 codes with weights of another format, converted to C's dtype for the 16-bit MMA
    /// ([`layout::act8_on_16bit_mma`]).
    pub act8_on_16bit_mma: bool,
    /// The 16-bit dtype of the scale grid on B and of the zero points ([`layout::grid_dtype`]).
    pub grid_dtype: DType,
    /// A grid of scales multiplies the weights ([`layout::scale_on_b`]).
    pub scale_on_b: bool,
    /// K extent of a row of that grid, 0 for none or per channel ([`layout::b_scale_group`]).
    pub b_scale_group: u32,
    /// The grid is divided per channel by a power of two that joins the channel factor
    /// ([`layout::normalized_scales`]).
    pub normalized_scales: bool,
    /// An f32 factor per channel multiplies C ([`layout::channel_factor`]).
    pub channel_factor: bool,
    /// K extent of an activation scale group, 0 for one per row ([`layout::act_scale_group`]).
    pub act_scale_group: u32,
    /// N extent of a weight block scale, 0 without block scales.
    pub block_n: u32,
    /// The float weights' exponent offset ([`layout::float_shift`]) and the part the scales carry
    /// ([`layout::carried_shift`]).
    pub float_shift: i32,
    /// See `float_shift`.
    pub carried_shift: i32,
    /// 4-bit float weights: the sign bit of each slot ([`layout::float4_sign_bits`]).
    pub float4_sign_bits: Option<[u32; 4]>,
    /// The tiles the kernel is compiled with ([`crate::tiles::tiles_of`]).
    pub tiles: Vec<TileConfig>,
}

impl KernelSpec {
    /// The derived facts of this kernel, once.
    pub fn lower(&self) -> Lowered {
        let spec = self;
        let grid_dtype = layout::grid_dtype(spec);
        Lowered {
            spec: *spec,
            act8: layout::is_8bit_activation(spec.a),
            a_bytes: layout::a_bytes(spec.a),
            act8_on_16bit_mma: layout::act8_on_16bit_mma(spec),
            grid_dtype,
            scale_on_b: layout::scale_on_b(spec),
            b_scale_group: layout::b_scale_group(spec),
            normalized_scales: layout::normalized_scales(spec),
            channel_factor: layout::channel_factor(spec),
            act_scale_group: layout::act_scale_group(spec),
            block_n: match spec.scale.granularity {
                ScaleGranularity::Block { n, .. } => n,
                _ => 0,
            },
            float_shift: layout::float_shift(spec),
            carried_shift: layout::carried_shift(spec),
            float4_sign_bits: layout::float4_sign_bits(grid_dtype, spec.b),
            tiles: crate::tiles::tiles_of(spec),
        }
    }
}
