"""nki.language (nl) of NKI 0.6 on nkisim: dtypes, memory regions, NkiTensor, the nl ops and
iterators. Ops run on the runtime as they are called (python/nki/language/_ops.py); names of
the 0.6 reference that nkisim does not implement raise NotImplementedError when used."""
from nki import _api
from nki.dtype import (  # noqa: F401
    DType, MemoryRegion, bfloat16, bool_, float16, float32, float4_e2m1fn_x4, float8_e4m3,
    float8_e4m3fn, float8_e4m3fn_x4, float8_e5m2, float8_e5m2_x4, float8_e8m0fnu, hbm, int8,
    int16, int32, is_hbm, is_on_chip, is_psum, is_sbuf, private_hbm, psum, sbuf, shared_hbm,
    tfloat32, uint8, uint16, uint32, _UNSUPPORTED_DTYPES)
from nki.tensor import NKIObject, NkiTensor, ds  # noqa: F401
from nki.language._ops import *  # noqa: F401,F403
from nki.language._ops import alu_of, act_of  # noqa: F401
from nki.language import _ops
from nki.language._memory import (  # noqa: F401
    broadcast_to, device_print, empty_like, expand_dims, full, gather_flattened, load,
    load_transpose2d, ndarray, ones, rand, random_seed, shared_constant, shared_identity_matrix,
    store, zeros, zeros_like)
from nki.language._control import (  # noqa: F401
    affine_range, dynamic_range, fori_loop, no_reorder, num_programs, program_id, program_ndim,
    sequential_range, static_range, tile_size, while_loop)

_M = "nki.language"
abs_min = _api.unsupported(_M, "abs_min", "the Vector ALU of the runtime has no abs_min op")
average = _api.unsupported(_M, "average", "no average reduction in the runtime's ALU")
prelu = _api.unsupported(_M, "prelu", "no parametric-ReLU activation in the runtime")
_api._UNSUPPORTED.setdefault(_M, {})["abs_max"] = "as a function: " + _ops._ABS_MAX_REASON
for _name, _reason in _UNSUPPORTED_DTYPES.items():
    _api._UNSUPPORTED.setdefault(_M, {})[_name] = _reason

_api.reference_names(_M, """
DType MemoryRegion NKIObject NkiTensor abs abs_max abs_min add affine_range all arctan average
bfloat16 bitwise_and bitwise_or bitwise_xor bool_ broadcast_to bypass ceil copy cos device_print
divide dropout ds dynamic_range empty_like equal erf erf_dx exp expand_dims float16 float32
float4_e2m1fn_x4 float8_e4m3 float8_e4m3fn float8_e4m3fn_x4 float8_e5m2 float8_e5m2_x4
float8_e8m0fnu floor fmod fori_loop full gather_flattened gelu gelu_apprx_sigmoid
gelu_apprx_sigmoid_dx gelu_apprx_tanh gelu_dx greater greater_equal hbm int16 int32 int8 invert
is_hbm is_on_chip is_psum is_sbuf left_shift less less_equal load load_transpose2d log
logical_and logical_not logical_or logical_xor matmul max maximum mean min minimum mish mod
multiply ndarray negative no_reorder not_equal num_programs ones power prelu private_hbm prod
program_id program_ndim psum rand random_seed reciprocal relu right_shift rms_norm rsqrt sbuf
sequential_range shared_constant shared_hbm shared_identity_matrix sigmoid sign silu silu_dx sin
softmax softplus sqrt square static_range store subtract sum tan tanh tfloat32 tile_size
transpose trunc uint16 uint32 uint8 var where while_loop zeros zeros_like
""")
