"""Runs the NKI library's kernels that have a torch reference (*_torch.py) on nkisim at small
shapes and compares each with its reference: `scripts/check-nki-library.sh PATH` (PATH: a
checkout of aws-neuron/nki-library). Prints one row per kernel and case:

  PASS            every output within atol + rtol * max|golden| of the reference
  WRONG (err)     an output outside it (err: the largest |actual - golden| / max|golden|)
  ERROR (why)     the kernel did not run: the first missing API or the exception
  NOT RUN (why)   no small case is defined here for that kernel (its signature needs one)

Nothing of the library is copied: the kernels and references are imported from PATH. The
cases (input shapes and arguments) are this script's, chosen small, from the shapes the
library's own fast tests use where they are small already.
"""
import importlib
import os
import subprocess
import sys
import traceback

import numpy as np


def _torch():
    import torch
    return torch


# --- cases ----------------------------------------------------------------------------------
# kernel: "module:function" under nkilib_src.nkilib.core; ref likewise; make(torch, gen) ->
# (kernel args dict, ref args dict); outputs compared in order (the ref's dict order).
def _randn(t, g, *shape, dtype=None):
    x = t.randn(*shape, generator=g)
    return x if dtype is None else x.to(dtype)


def _cumsum(shape, dtype):
    def make(t, g):
        x = _randn(t, g, *shape, dtype=getattr(t, dtype))
        return {"x": x}, {"x": x.float()}
    return make


def _cascaded_max(shape):
    def make(t, g):
        x = _randn(t, g, *shape)
        return {"input_tensor": x}, {"input_tensor": x}
    return make


def _rope(d_head, b, heads, s):
    def make(t, g):
        x = _randn(t, g, d_head, b, heads, s)
        angle = t.rand(d_head // 2, b, s, generator=g) * 6.28
        return ({"x_in": x, "cos": angle.cos(), "sin": angle.sin()},
                {"x_in": x, "cos": angle.cos(), "sin": angle.sin()})
    return make


def _nonzero(t_len, cols):
    def make(t, g):
        x = (t.rand(t_len, cols, generator=g) > 0.7).float()
        return {"input_tensor": x}, {"input_tensor": x}
    return make


def _norm(b, s, h, beta=False):
    def make(t, g):
        x = _randn(t, g, b, s, h).to(t.float16)
        gamma = _randn(t, g, 1, h).to(t.float16)
        args = {"input": x, "gamma": gamma,
                "output": t.zeros((128, b * s, h // 128), dtype=t.float16)}
        if beta:
            args["beta"] = _randn(t, g, 1, h).to(t.float16)
        ref = dict(args)
        ref.update({k: v.float() for k, v in args.items()})
        return args, ref
    return make


def _indexed_flatten(T, E, f_len):
    def make(t, g):
        x = t.arange(E * T, dtype=t.int32).reshape(E, T)
        output_len = ((E * T + 1024 + 127) // 128) * 128
        offsets = t.tensor([T // f_len * i for i in range(E)], dtype=t.int32)
        args = {"input_tensor": x, "f_len": f_len, "output_len": output_len,
                "row_offsets": offsets, "row_offsets_start": None, "padding_val": -1}
        return args, dict(args)
    return make


def _rope_hf(b, qh, kvh, s, d, dtype):
    def make(t, g):
        dt = getattr(t, dtype)
        q = _randn(t, g, b, qh, s, d).to(dt)
        k = _randn(t, g, b, kvh, s, d).to(dt)
        cos = _randn(t, g, b, s, d).to(dt)
        sin = _randn(t, g, b, s, d).to(dt)
        args = {"q": q, "k": k, "q_out": t.zeros_like(q), "k_out": t.zeros_like(k),
                "cos": cos, "sin": sin}
        ref = {k_: v.float() for k_, v in args.items()}
        return args, ref
    return make


def _out_proj_tkg(d, b, n, s, h, dtype, transpose_out=False):
    def make(t, g):
        dt = getattr(t, dtype)
        attention = (t.rand(d, b, n, s, generator=g) * 2 - 1).to(dt)
        weight = (t.rand(n * d, h, generator=g) * 2 - 1).to(dt)
        bias = (t.rand(1, h, generator=g) * 2 - 1).to(dt)
        args = {"attention": attention, "weight": weight, "bias": bias,
                "TRANSPOSE_OUT": transpose_out}
        ref = {k: (v.float() if isinstance(v, t.Tensor) else v) for k, v in args.items()}
        return args, ref
    return make


def _attention_cte(bs, sq, skv, d, dtype, causal):
    def make(t, g):
        dt = getattr(t, dtype)
        q = _randn(t, g, bs, sq, d).to(dt)          # tp_q: [bs, seqlen_q, d]
        k = _randn(t, g, bs, d, skv).to(dt)         # not tp_k: [bs, d, seqlen_kv]
        v = _randn(t, g, bs, skv, d).to(dt)
        args = {"q": q, "k": k, "v": v, "scale": d ** -0.5, "causal_mask": causal}
        ref = {k_: (v_.float() if isinstance(v_, t.Tensor) else v_) for k_, v_ in args.items()}
        return args, ref
    return make


def _gen_mask_hbm(bs, q_head, s_active, s_prior, block_len=0):
    def make(t, g):
        cache = t.randint(1, s_prior - s_active, (bs,), generator=g).float()
        pos = cache.repeat_interleave(s_active).reshape(1, bs * s_active)
        args = {"pos_ids_hbm": pos, "bs": bs, "q_head": q_head, "s_active": s_active,
                "s_prior": s_prior, "block_len": block_len}
        return args, dict(args)
    return make


def _topk(lnc, batch, seqlen, vocab, k):
    def make(t, g):
        import nki.language as nl
        rt = importlib.import_module(PKG + "topk.rotational_topk")
        ut = importlib.import_module(PKG + "topk.rotational_topk_utils")
        rt.cleanup_rotational_constants()
        inp = t.randn(batch * seqlen, vocab, generator=g)
        topk = ut.create_topk_config(inp_shape=(batch, seqlen, vocab), inp_dtype=nl.float32, k=k,
                                     sorted=True, num_programs=lnc)
        config = ut.create_rotational_topk_config(inp_shape=(topk.BxS, topk.vocab_size),
                                                  topk_config=topk)
        config = rt.prepare_rotational_constants(config)
        return {"inp": inp, "config": config}, {"inp": inp, "config": config}
    return make


def _attn_tkg_wrapper(attention_tkg):
    """This script's own HBM-in / HBM-out kernel around attention_tkg, which takes an SBUF
    manager and writes into out / k_out (the library's tests wrap it the same way)."""
    def attn_tkg_hbm(q, k_active, v_active, k_prior, v_prior, mask, inv_freqs, rope_pos_ids, cfg):
        import nki.language as nl
        alloc = importlib.import_module(PKG + "utils.allocator")
        logging = importlib.import_module(PKG + "utils.logging")
        sbm = alloc.SbufManager(0, nl.tile_size.total_available_sbuf_size - 16 * 1024,
                                logging.Logger("SBM"))
        sbm.open_scope()
        out = nl.ndarray((cfg.bs, cfg.q_head, cfg.d_head, cfg.s_active), dtype=q.dtype,
                         buffer=nl.shared_hbm)
        k_out = nl.ndarray((cfg.bs, 1, cfg.d_head, cfg.s_active), dtype=q.dtype,
                           buffer=nl.shared_hbm)
        out, k_out = attention_tkg(q, k_active, v_active, k_prior, v_prior, mask, out, cfg, sbm,
                                   inv_freqs, rope_pos_ids, None, None, None, k_out)
        sbm.close_scope()
        return out, k_out
    return attn_tkg_hbm


def _attn_tkg(bs, q_head, s_active, s_prior, d, dtype):
    """Flat KV cache, K prior transposed in HBM, RoPE fused, positions from ids (the library's
    fast configurations at a small s_prior)."""
    def make(t, g):
        utils = importlib.import_module(PKG + "attention.attention_tkg_utils")
        masks = importlib.import_module("test.integration.nkilib.core.attention."
                                        "test_attention_tkg_utils")
        cfg = utils.AttnTKGConfig(bs, q_head, s_active, s_prior, s_prior, d, 0, tp_k_prior=True,
                                  use_pos_id=True, fuse_rope=True)
        dt = getattr(t, dtype)
        rnd = lambda *shape: (t.rand(*shape, generator=g) * 2 - 1).to(dt)  # noqa: E731
        pos = ((t.arange(bs) * 3 + s_prior // 4 * 3) % (s_prior - s_active)).float()
        args = {"q": rnd(bs, q_head, s_active, d), "k_active": rnd(bs, 1, s_active, d),
                "v_active": rnd(bs, 1, s_active, d), "k_prior": rnd(bs, 1, s_prior, d),
                "v_prior": rnd(bs, 1, s_prior, d),
                "mask": masks.build_active_attention_mask(bs, q_head, s_active,
                                                          transposed=True).to(t.uint8),
                "inv_freqs": t.rand(d // 2, 1, generator=g),
                "rope_pos_ids": pos[:, None].expand(bs, s_active).contiguous(), "cfg": cfg}
        ref = {k: (v.float() if isinstance(v, t.Tensor) and v.is_floating_point() else v)
               for k, v in args.items()}
        ref.update(out=t.zeros(bs, q_head, d, s_active), k_out=t.zeros(bs, 1, d, s_active),
                   sbm=None)
        return args, ref
    return make


def _out_proj_cte(b, n, d, s, h, dtype):
    def make(t, g):
        dt = getattr(t, dtype)
        attention = (t.rand(b, n, d, s, generator=g) * 2 - 1).to(dt)
        weight = (t.rand(n * d, h, generator=g) * 2 - 1).to(dt)
        bias = (t.rand(1, h, generator=g) * 2 - 1).to(dt)
        args = {"attention": attention, "weight": weight, "bias": bias}
        return args, {k: v.float() for k, v in args.items()}
    return make


def _qkv_tkg(b, s, h, n_q, n_kv, d, dtype, fused_add):
    """Hidden [B, S, H] in HBM, RMS norm, output [B, S, I] (the BSD layout); fused_add adds
    attn_prev and mlp_prev first (the DMA-engine sum, nisa.dma_compute)."""
    def make(t, g):
        dt = getattr(t, dtype)
        i = (n_q + 2 * n_kv) * d
        args = {"hidden": _randn(t, g, b, s, h).to(dt),
                "qkv_w": (_randn(t, g, h, i) * h ** -0.5).to(dt),
                "norm_w": _randn(t, g, 1, h).to(dt), "fused_add": fused_add,
                "d_head": d, "num_kv_heads": n_kv, "num_q_heads": n_q}
        if fused_add:
            args["mlp_prev"] = _randn(t, g, b, s, h).to(dt)
            args["attn_prev"] = _randn(t, g, b, s, h).to(dt)
        return args, {k: (v.float() if isinstance(v, t.Tensor) else v) for k, v in args.items()}
    return make


def _router_topk(t_, h, e, k, act, indirect=False, shard=False):
    """x [H, T] in HBM (layout 0), outputs written into router_logits, expert_affinities (bf16)
    and expert_index (uint32), as the library's tests pass them."""
    def make(t, g):
        common = importlib.import_module(PKG + "utils.common_types")
        bf = t.bfloat16
        args = {"x": _randn(t, g, h, t_).to(bf), "w": (_randn(t, g, h, e) * h ** -0.5).to(bf),
                "w_bias": _randn(t, g, 1, e).to(bf),
                "router_logits": t.zeros(t_, e, dtype=bf),
                "expert_affinities": t.zeros(t_, e, dtype=bf),
                "expert_index": np.zeros((t_, k), dtype=np.uint32),
                "act_fn": getattr(common.RouterActFnType, act), "k": k, "x_hbm_layout": 0,
                "x_sb_layout": 0, "router_pre_norm": False,
                "use_indirect_dma_scatter": indirect, "shard_on_tokens": shard}
        ref = {n: (v.float() if isinstance(v, t.Tensor) else v) for n, v in args.items()}
        ref["expert_index"] = t.zeros(t_, k, dtype=t.int64)
        return args, ref
    return make


def _attention_bwd(b, hq, hkv, s, d, causal):
    """q, k, v, dy [B, H, d, S] bf16; o and lse from the library's own forward reference
    (compute_o_lse), as its tests make them; mixed precision, softmax scale 1.0 when causal."""
    def make(t, g):
        ref_mod = importlib.import_module(PKG + "attention.attention_bwd_torch")
        bf = t.bfloat16
        q, dy = (_randn(t, g, b, hq, d, s).to(bf) for _ in range(2))
        k, v = (_randn(t, g, b, hkv, d, s).to(bf) for _ in range(2))
        scale = 1.0 if causal else None
        o, lse, _ = ref_mod.compute_o_lse(q, k, v, causal, True, softmax_scale=scale)
        args = {"q_ref": q, "k_ref": k, "v_ref": v, "o_ref": o.to(bf), "dy_ref": dy,
                "lse_ref": lse.float(), "use_causal_mask": causal, "mixed_precision": True,
                "softmax_scale": scale}
        return args, {n: (x.float() if isinstance(x, t.Tensor) else x) for n, x in args.items()}
    return make


def _moe_tkg(t_, h, i, e, k):
    """Selected experts (is_all_expert False), bf16 weights [E, H, 2, I] / [E, I, H], top-k
    indices int32 without repeats per token, affinities [T, E] at those experts summing to 1."""
    def make(t, g):
        bf = t.bfloat16
        idx = t.stack([t.randperm(e, generator=g)[:k] for _ in range(t_)]).to(t.int32)
        w = t.rand(t_, k, generator=g)
        aff = t.zeros(t_, e).scatter_(1, idx.long(), w / w.sum(1, keepdim=True)).to(bf)
        args = {"hidden_input": _randn(t, g, t_, h).to(bf),
                "expert_gate_up_weights": (_randn(t, g, e, h, 2, i) * h ** -0.5).to(bf),
                "expert_down_weights": (_randn(t, g, e, i, h) * i ** -0.5).to(bf),
                "expert_affinities": aff, "expert_index": idx, "is_all_expert": False}
        ref = {n: (x.float() if isinstance(x, t.Tensor) and x.is_floating_point() else x)
               for n, x in args.items()}
        return args, ref
    return make


def _moe_block_tkg(b, s, h, i, e, k, has_bias, clamp):
    """Selective experts (E global = E local), LNC 2 (the kernel's only grid), as the library's
    generate_inputs makes them: inp, gamma, router weights and bias uniform in [-0.1, 0.1],
    expert weights [E, H, 2, I] / [E, I, H] and biases normal; softmax router, Swish,
    post-scaled affinities, its clamp limits (gate <= 7, -6 <= up <= 8)."""
    def make(t, g):
        common = importlib.import_module(PKG + "utils.common_types")
        nl = importlib.import_module("nki.language")
        bf = t.bfloat16

        def uniform(*shape):
            return (t.rand(*shape, generator=g) * 0.2 - 0.1).to(bf)
        args = {"inp": uniform(b, s, h), "gamma": uniform(1, h), "router_weights": uniform(h, e),
                "expert_gate_up_weights": _randn(t, g, e, h, 2, i).to(bf),
                "expert_down_weights": _randn(t, g, e, i, h).to(bf),
                "router_bias": uniform(1, e) if has_bias else None,
                "expert_gate_up_bias": _randn(t, g, e, 2, i).to(bf) if has_bias else None,
                "expert_down_bias": _randn(t, g, e, h).to(bf) if has_bias else None,
                "top_k": k, "router_act_fn": common.RouterActFnType.SOFTMAX,
                "router_pre_norm": False, "norm_topk_prob": False,
                "expert_affinities_scaling_mode": common.ExpertAffinityScaleMode.POST_SCALE,
                "hidden_act_fn": common.ActFnType.Swish,
                "gate_clamp_upper_limit": 7.0 if clamp else None, "gate_clamp_lower_limit": None,
                "up_clamp_upper_limit": 8.0 if clamp else None,
                "up_clamp_lower_limit": -6.0 if clamp else None,
                "router_mm_dtype": nl.bfloat16, "skip_router_logits": False,
                "is_all_expert": False}
        return args, dict(args)
    return make


def _moe_cte(impl, t_, h, i, e, blk, k, bias):
    """Blockwise MoE (moe_cte's unified entry, LNC 2): each token routed to k distinct experts;
    each expert's tokens fill whole blocks of blk positions (the rest point at the zero row T),
    blocks in expert order, padding blocks to the last expert up to the library's block count
    ceil((T k - (E - 1)) / blk) + E - 1; hidden and masked affinities uniform in [0, 1), weights
    uniform in [-0.1, 0.1] (the library's generator), bf16."""
    def make(t, g):
        cte = importlib.import_module(PKG + "moe.moe_cte.moe_cte")
        common = importlib.import_module(PKG + "utils.common_types")
        utils = importlib.import_module(PKG + "moe.moe_cte.moe_cte_utils")
        tests = importlib.import_module("test.integration.nkilib.core.moe.moe_cte.test_moe_cte_common")
        bf = t.bfloat16
        experts = t.stack([t.randperm(e, generator=g)[:k] for _ in range(t_)])   # [T, k]
        mask = t.zeros(t_ + 1, e).scatter_(1, experts, 1.0)
        mask[t_] = 0
        n_blocks = -(-(t_ * k - (e - 1)) // blk) + e - 1
        positions, owners = [], []
        for x in range(e):
            ids = [n for n in range(t_) if mask[n, x] > 0]
            blocks = max(1, -(-len(ids) // blk)) if ids else 0
            positions += ids + [t_] * (blocks * blk - len(ids))
            owners += [x] * blocks
        owners += [e - 1] * (n_blocks - len(owners))
        positions += [t_] * (n_blocks * blk - len(positions))
        hidden = t.rand(t_ + 1, h, generator=g)
        hidden[t_] = 0
        aff = (t.rand(t_ + 1, e, generator=g) * mask).reshape(-1, 1)
        args = {"hidden_states": hidden.to(bf), "expert_affinities_masked": aff.to(bf),
                "gate_up_proj_weight": (t.rand(e, h, 2, i, generator=g) * 0.2 - 0.1).to(bf),
                "down_proj_weight": (t.rand(e, i, h, generator=g) * 0.2 - 0.1).to(bf),
                "token_position_to_id": t.tensor(positions, dtype=t.int32),
                "block_to_expert": t.tensor(owners, dtype=t.int32).reshape(-1, 1),
                "block_size": blk,
                "activation_function": common.ActFnType.SiLU,
                "skip_dma": utils.SkipMode(False, False),
                "is_tensor_update_accumulating": k != 1,
                "expert_affinities_scaling_mode": common.ExpertAffinityScaleMode.POST_SCALE}
        if bias:
            args["gate_and_up_proj_bias"] = (t.rand(e, 2, i, generator=g) * 2 - 1).to(bf)
            args["down_proj_bias"] = (t.rand(e, h, generator=g) * 2 - 1).to(bf)
        ref = dict(args, bwmm_func=getattr(tests.BWMMFunc, impl), lnc_degree=2, top_k=k)
        impl_enum = {"SHARD_ON_INTERMEDIATE": cte.MoECTEImplementation.shard_on_i,
                     "SHARD_ON_BLOCK": cte.MoECTEImplementation.shard_on_block}[impl]
        args["spec"] = cte.MoECTESpec(implementation=impl_enum)
        return args, ref
    return make


def _mx_gate_up_wrapper(gate_up):
    """This script's own HBM-in / HBM-out kernel around the MxFP4 gate/up projection, which takes
    SBUF state as its docstring lays it out: the hidden (fp8_e5m2 x4) shard of this program in
    SBUF, its scales in the quadrant layout (rows 32 q .. 32 q + 4 hold scale rows 4 q .. 4 q + 4),
    the weights (fp4 x4) and their scales in HBM, the bias in SBUF; program 0 stores the result,
    with the rows past I zeroed (the kernel defines only I / 4 rows of the last 512-column tile)."""
    def gate_up_hbm(hidden_qtz, hidden_scale, weight_qtz, weight_scale, bias, H, I, BxS):
        import nki.isa as nisa
        import nki.language as nl
        consts = importlib.import_module(PKG + "mlp.mlp_tkg.projection_mx_constants")
        view = importlib.import_module(PKG + "utils.tensor_view")
        n_prgs, prg = nl.num_programs(0), nl.program_id(0)
        shard = H // 512 // n_prgs
        n_i512 = -(-I // 512)
        hidden_sb = nl.ndarray((128, shard, BxS), dtype=nl.float8_e5m2_x4, buffer=nl.sbuf)
        nisa.dma_copy(dst=hidden_sb, src=hidden_qtz.view(nl.float8_e5m2_x4)[
            :, prg * shard:(prg + 1) * shard, :])
        scale_sb = nl.ndarray((128, shard, BxS), dtype=nl.uint8, buffer=nl.sbuf)
        for q in range(4):
            nisa.dma_copy(dst=scale_sb[32 * q:32 * q + 4, :, :],
                          src=hidden_scale[4 * q:4 * q + 4, prg * shard:(prg + 1) * shard, :])
        bias_sb = nl.ndarray((128, n_i512, 4), dtype=nl.bfloat16, buffer=nl.sbuf)
        nisa.memset(dst=bias_sb, value=0.0)
        nisa.dma_copy(dst=bias_sb[:bias.shape[0], :, :], src=bias)
        result = gate_up(hidden_qtz_sb=view.TensorView(hidden_sb),
                         hidden_scale_sb=view.TensorView(scale_sb),
                         weight_qtz=view.TensorView(weight_qtz.view(nl.float4_e2m1fn_x4)),
                         weight_scale=view.TensorView(weight_scale),
                         bias_sb=view.TensorView(bias_sb),
                         cfg=consts.ProjConfig(H, I, BxS, n_prgs, prg))
        out = nl.ndarray(result.shape, dtype=nl.bfloat16, buffer=nl.shared_hbm)
        if prg == 0:
            nisa.dma_copy(dst=out, src=result)
            if I % 512:
                pad = (512 - I % 512) // 4
                zeros = nl.ndarray((pad, 1, BxS, 4), dtype=nl.bfloat16, buffer=nl.sbuf)
                nisa.memset(dst=zeros, value=0.0)
                nisa.dma_copy(dst=out[128 - pad:, n_i512 - 1:n_i512, :, :], src=zeros)
        return out
    return gate_up_hbm


def _unpack_fp4_x4(packed):
    """fp4_e2m1fn x4 codes (uint16 [P, F]) -> float32 torch [P, 4 F], lowest nibble first. The
    reference's own unpacker indexes with int32 tensors, which torch 1.13 (Debian's) refuses; it
    takes this one through its weight_unpack_fn argument."""
    t = _torch()
    codes = packed.astype(np.int64)[..., None] >> np.array([0, 4, 8, 12]) & 0xF
    magnitude = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0], np.float32)[codes & 7]
    values = np.where(codes & 8, -magnitude, magnitude)
    return t.from_numpy(values.reshape(packed.shape[:-1] + (packed.shape[-1] * 4,)))


def _mx_gate_up(bxs, h, i):
    """MxFP4 gate/up projection (trn3, LNC 2): hidden fp8_e5m2 x4 [128, H/512, BxS] and weights
    fp4_e2m1fn x4 [128, H/512, I] made as raw bits (finite values: fp8 exponents 12..17, every
    fp4 code), block scales uint8 in 125..129 ([16, H/512, .]), bias [I/4 or 128, I/512, 4]."""
    def make(t, g):
        def bits(lo, hi, *shape):
            return t.randint(lo, hi, shape, generator=g).numpy().astype(np.uint32)
        n_h = h // 512

        def fp8(*shape):   # sign, exponent 12..17, mantissa: one byte each, 4 to a uint32
            b = (bits(0, 2, *shape, 4) << 7) | (bits(12, 18, *shape, 4) << 2) | bits(0, 4, *shape, 4)
            return (b << np.array([0, 8, 16, 24], np.uint32)).sum(-1).astype(np.uint32)

        def fp4(*shape):   # any 4-bit code, 4 to a uint16
            b = bits(0, 16, *shape, 4)
            return (b << np.array([0, 4, 8, 12], np.uint32)).sum(-1).astype(np.uint16)
        hidden, weight = fp8(128, n_h, bxs), fp4(128, n_h, i)
        h_scale = t.randint(125, 130, (16, n_h, bxs), generator=g, dtype=t.uint8)
        w_scale = t.randint(125, 130, (16, n_h, i), generator=g, dtype=t.uint8)
        bias = t.rand(128 if i >= 512 else i // 4, -(-i // 512), 4, generator=g).to(t.bfloat16)
        common = {"H": h, "I": i, "BxS": bxs}
        args = dict(common, hidden_qtz=hidden, hidden_scale=h_scale.numpy(), weight_qtz=weight,
                    weight_scale=w_scale.numpy(), bias=bias)
        ref = dict(common, hidden_qtz=hidden, hidden_scale=h_scale, weight_qtz=weight,
                   weight_scale=w_scale, bias=bias.float(), weight_unpack_fn=_unpack_fp4_x4)
        return args, ref
    return make


CASES = [
    ("cumsum.cumsum:cumsum", "cumsum.cumsum_torch:cumsum_torch_ref", [
        ("x[1,256] fp32", _cumsum((1, 256), "float32"), 1e-3, 1e-3),
        ("x[128,512] fp32", _cumsum((128, 512), "float32"), 1e-3, 1e-3),
        ("x[4,2,256] bf16", _cumsum((4, 2, 256), "bfloat16"), 1e-3, 1e-2),
    ]),
    ("max.cascaded_max:cascaded_max", "max.cascaded_max_torch:cascaded_max_torch_ref", [
        ("x[4,1024] fp32", _cascaded_max((4, 1024)), 1e-5, 1e-5),
    ]),
    ("embeddings.rope:RoPE", "embeddings.rope_torch:rope_torch_ref", [
        ("x[64,1,2,128] fp32", _rope(64, 1, 2, 128), 1e-4, 1e-4),
    ]),
    ("embeddings.rope_hf:rope_hf", "embeddings.rope_hf_torch:rope_hf_torch_ref", [
        ("q[1,4,256,128] k[1,1,256,128] fp32", _rope_hf(1, 4, 1, 256, 128, "float32"),
         1e-4, 1e-4),
        ("q[1,4,256,128] k[1,1,256,128] bf16", _rope_hf(1, 4, 1, 256, 128, "bfloat16"),
         1e-2, 1e-2),
    ]),
    ("output_projection.output_projection_tkg:output_projection_tkg",
     "output_projection.output_projection_tkg_torch:output_projection_tkg_torch_ref", [
        ("attn[128,4,2,1] w[256,512] bf16", _out_proj_tkg(128, 4, 2, 1, 512, "bfloat16"),
         1e-2, 1e-2),
        # the reference's transposed layout assumes LNC 2 when H divides by 256
        ("attn[128,4,2,1] w[256,512] bf16 TRANSPOSE_OUT, LNC 2",
         _out_proj_tkg(128, 4, 2, 1, 512, "bfloat16", True), 1e-2, 1e-2, 2),
    ]),
    ("output_projection.output_projection_cte.output_projection_cte:output_projection_cte",
     "output_projection.output_projection_cte.output_projection_cte_torch:"
     "output_projection_cte_torch_ref", [
        # the library's tolerances for bf16 (test_output_proj_cte.py): rtol 2e-2, atol 1e-5
        ("attn[1,2,128,512] w[256,1024] bf16", _out_proj_cte(1, 2, 128, 512, 1024, "bfloat16"),
         1e-5, 2e-2),
        ("attn[2,1,64,640] w[64,512] bf16, LNC 2", _out_proj_cte(2, 1, 64, 640, 512, "bfloat16"),
         1e-5, 2e-2, 2),
    ]),
    ("qkv.qkv_tkg:qkv_tkg", "qkv.qkv_tkg_torch:qkv_tkg_torch_ref", [
        ("x[4,1,1024] q 8 kv 1 d 128 bf16 rms", _qkv_tkg(4, 1, 1024, 8, 1, 128, "bfloat16", False),
         1e-5, 2e-2),
        ("x[2,2,1024] q 4 kv 1 d 64 bf16 rms + fused add, LNC 2",
         _qkv_tkg(2, 2, 1024, 4, 1, 64, "bfloat16", True), 1e-5, 2e-2, 2),
    ]),
    ("router_topk.router_topk:router_topk", "router_topk.router_topk_torch:router_topk_torch_ref", [
        # the library's router_topk tolerances: rtol 2e-2, atol 1e-5
        ("T 4, H 3072, E 128, k 4 softmax bf16", _router_topk(4, 3072, 128, 4, "SOFTMAX"),
         1e-5, 2e-2),
        ("T 48, H 1024, E 128, k 4 softmax bf16 shard on tokens, LNC 2",
         _router_topk(48, 1024, 128, 4, "SOFTMAX", shard=True), 1e-5, 2e-2, 2),
        ("T 8, H 1024, E 128, k 8 sigmoid bf16 indirect scatter",
         _router_topk(8, 1024, 128, 8, "SIGMOID", True), 1e-5, 2e-2),
    ]),
    ("attention.attention_bwd:attention_bwd", "attention.attention_bwd_torch:attention_bwd_torch_ref", [
        # the library's attention_bwd tolerances: rtol 2e-2, atol 1e-5
        ("q[1,2,64,512] kv heads 1 bf16 causal", _attention_bwd(1, 2, 1, 512, 64, True),
         1e-5, 2e-2),
        ("q[1,2,128,512] kv heads 2 bf16, LNC 2", _attention_bwd(1, 2, 2, 512, 128, False),
         1e-5, 2e-2, 2),
    ]),
    ("moe.moe_tkg.moe_tkg:moe_tkg", "moe.moe_tkg.moe_tkg_torch:moe_tkg_torch_ref", [
        # the library's moe_tkg tolerances: rtol 2e-2, atol 1e-5
        ("T 4, H 1024, I 256, E 4, k 2 bf16 selected experts", _moe_tkg(4, 1024, 256, 4, 2),
         1e-5, 2e-2),
    ]),
    ("moe_block.moe_block_tkg:moe_block_tkg", "moe_block.moe_block_tkg_torch:moe_block_tkg_torch_ref", [
        # the library's moe_block_tkg tolerances for 16-bit weights: rtol 1e-2, atol 1e-5
        ("B 1, S 4, H 1024, I 192, E 8, k 4 bf16 bias clamp, LNC 2",
         _moe_block_tkg(1, 4, 1024, 192, 8, 4, True, True), 1e-5, 1e-2, 2),
    ]),
    ("moe.moe_cte.moe_cte:moe_cte", "moe.moe_cte.moe_cte_torch:moe_cte_torch_ref", [
        # the library's moe_cte tolerances (test_moe_cte.py): rtol 2e-2, atol 1e-5
        ("shard on I, T 256, H 512, I 256, E 4, block 256, k 2 bf16 bias, LNC 2",
         _moe_cte("SHARD_ON_INTERMEDIATE", 256, 512, 256, 4, 256, 2, True), 1e-5, 2e-2, 2),
    ]),
    ("mlp.mlp_tkg.gate_up_projection_mx_shard_H:gate_up_projection_mx_tp_shard_H",
     "mlp.mlp_tkg.mlp_proj_mxfp4_torch:gate_up_proj_mxfp4_torch_ref", [
        # the library's MxFP4 projection tests: trn3 only, LNC 2, rtol 2e-2, atol 1e-5
        ("BxS 4, H 3072, I 192 fp8 x fp4, trn3, LNC 2", _mx_gate_up(4, 3072, 192), 1e-5, 2e-2,
         2, "trn3"),
        ("BxS 4, H 1024, I 768 fp8 x fp4, trn3, LNC 2", _mx_gate_up(4, 1024, 768), 1e-5, 2e-2,
         2, "trn3"),
    ], _mx_gate_up_wrapper),
    ("attention.attention_cte:attention_cte", "attention.attention_cte_torch:attention_cte_torch_ref", [
        # the library's attention_cte tolerances (test_attention_cte.py): rtol 2e-2, atol 1e-5
        ("q[1,256,64] kv 256 fp32 causal", _attention_cte(1, 256, 256, 64, "float32", True),
         1e-5, 2e-2),
        ("q[1,128,64] kv 512 bf16", _attention_cte(1, 128, 512, 64, "bfloat16", False),
         1e-5, 2e-2),
    ]),
    ("attention.gen_mask_tkg:gen_mask_tkg_hbm", "attention.gen_mask_tkg_torch:gen_mask_tkg_hbm_torch_ref", [
        ("bs 4, qh 1, s_active 5, s_prior 256 flat", _gen_mask_hbm(4, 1, 5, 256), 0, 0),
        ("bs 4, qh 1, s_active 5, s_prior 256 block 16", _gen_mask_hbm(4, 1, 5, 256, 16), 0, 0),
        ("bs 8, qh 8, s_active 5, s_prior 4096 flat, LNC 2", _gen_mask_hbm(8, 8, 5, 4096), 0, 0, 2),
    ]),
    ("topk.rotational_topk:rotational_topk", "topk.torch_ref:topk_torch_ref", [
        ("x[8x5,4058] k 256 fp32, LNC 2", _topk(2, 8, 5, 4058, 256), 1e-5, 1e-3, 2),
        ("x[1,3168] k 256 fp32, LNC 2", _topk(2, 1, 1, 3168, 256), 1e-5, 1e-3, 2),
    ]),
    ("attention.attention_tkg:attention_tkg", "attention.attention_tkg_torch:attention_tkg_torch_ref", [
        ("b 4, qh 2, s_active 7, s_prior 256, d 128 bf16 rope", _attn_tkg(4, 2, 7, 256, 128, "bfloat16"),
         1e-5, 1e-2),
        ("b 4, qh 2, s_active 7, s_prior 256, d 128 bf16 rope, LNC 2",
         _attn_tkg(4, 2, 7, 256, 128, "bfloat16"), 1e-5, 1e-2, 2),
    ], _attn_tkg_wrapper),
    ("subkernels.find_nonzero_indices:find_nonzero_indices",
     "subkernels.find_nonzero_indices_torch:find_nonzero_indices_torch_ref", [
        ("x[256,8] fp32", _nonzero(256, 8), 0, 0),
    ]),
    ("subkernels.indexed_flatten:indexed_flatten",
     "subkernels.indexed_flatten_torch:indexed_flatten_torch_ref", [
        ("T 4096, E 2, f_len 128 int32, LNC 2", _indexed_flatten(4096, 2, 128), 0, 0, 2),
    ]),
    ("subkernels.rmsnorm_tkg:rmsnorm_tkg",
     "subkernels.rmsnorm_torch:rmsnorm_tkg_torch_ref_lnc1", [
        ("x[1,4,2048] fp16", _norm(1, 4, 2048), 1e-2, 1e-2),
    ]),
    ("subkernels.layernorm_tkg:layernorm_tkg",
     "subkernels.layernorm_torch:layernorm_tkg_torch_ref_lnc1", [
        ("x[1,4,2048] fp16 + beta", _norm(1, 4, 2048, beta=True), 1e-2, 1e-2),
    ]),
]

PKG = "nkilib_src.nkilib.core."


def _load(spec):
    module, name = spec.split(":")
    return getattr(importlib.import_module(PKG + module), name)


def _first_missing(exc):
    """The first missing API an exception names, else the exception."""
    text = f"{type(exc).__name__}: {exc}".splitlines()[0]
    return text[:160]


def _as_list(out):
    if isinstance(out, dict):
        return list(out.values())
    if isinstance(out, (list, tuple)):
        return list(out)
    return [out]


def _np(x):
    t = _torch()
    if isinstance(x, t.Tensor):
        return x.detach().float().numpy() if x.is_floating_point() else x.detach().numpy()
    return np.asarray(x)


def run_case(kernel, ref, make, atol, rtol, lnc=1, platform=None):
    """platform: run on that target's profile (trn3), as the library harness's
    NEURON_PLATFORM_TARGET_OVERRIDE selects it; default the trn2 profile."""
    if platform is not None:
        old = os.environ.get("NEURON_PLATFORM_TARGET_OVERRIDE")
        os.environ["NEURON_PLATFORM_TARGET_OVERRIDE"] = platform
        try:
            return run_case(kernel, ref, make, atol, rtol, lnc)
        finally:
            if old is None:
                del os.environ["NEURON_PLATFORM_TARGET_OVERRIDE"]
            else:
                os.environ["NEURON_PLATFORM_TARGET_OVERRIDE"] = old
    import nki
    t = _torch()
    g = t.Generator().manual_seed(0)
    kargs, rargs = make(t, g)
    if hasattr(type(ref), "__getitem__") and hasattr(ref, "lnc"):
        ref = ref[lnc]  # the library's LncSubscriptable references: ref[lnc](...)
    ref_out = ref(**rargs)
    golden = _as_list(ref_out)
    result = nki.cpu_simulate(kernel)[lnc](**kargs)
    if result is None and isinstance(ref_out, dict):
        # outputs written into arguments (q_out, ...): the reference names them
        result = [kargs[name] for name in ref_out]
    actual = _as_list(result)
    if len(actual) != len(golden):
        return f"WRONG ({len(actual)} outputs, the reference has {len(golden)})"
    worst = 0.0
    for a, b in zip(actual, golden):
        a, b = _np(a).astype(np.float64), _np(b).astype(np.float64)
        if a.size != b.size:
            return f"WRONG (output shape {a.shape}, the reference's {b.shape})"
        a = a.reshape(b.shape)
        scale = max(np.abs(b).max(), 1e-30) if b.size else 1.0
        err = np.abs(a - b).max() if b.size else 0.0
        if not err <= atol + rtol * scale:
            return f"WRONG ({err / scale:.3g})"
        worst = max(worst, err / scale)
    return f"PASS ({worst:.2g})"


def reference_modules(root):
    base = os.path.join(root, "src", "nkilib_src", "nkilib", "core")
    out = []
    for d, _, files in os.walk(base):
        for f in files:
            if f.endswith("_torch.py") or f == "torch_ref.py":
                out.append(os.path.relpath(os.path.join(d, f), base)[:-3].replace(os.sep, "."))
    return sorted(out)


def main():
    root = os.path.abspath(sys.argv[1])
    # src/ holds nkilib_src; the checkout root holds the library's own `test` package, which
    # two references import (test.integration...); it shadows the standard library's `test`.
    sys.path[:0] = [os.path.join(root, "src"), root]
    try:
        commit = subprocess.run(["git", "-C", root, "rev-parse", "HEAD"], capture_output=True,
                                text=True).stdout.strip() or "unknown"
    except OSError:
        commit = "unknown"
    print(f"NKI library {root} at {commit}")
    if os.environ.get("CHECK_NKI_LIBRARY_SHIMS"):
        print("with the test-only stand-ins of scripts/test-shims on the path (neuron_dtypes, neuronxcc.nki.typing)")
    print("| kernel | case | result |")
    print("|---|---|---|")
    covered, passed = set(), set()
    counts = {"PASS": 0, "WRONG": 0, "ERROR": 0, "NOT RUN": 0}
    only = os.environ.get("CHECK_NKI_LIBRARY_ONLY")  # a substring of the kernels to run
    for kspec, rspec, cases, *wrap in CASES:
        covered.add(rspec.split(":")[0])
        if only and only not in kspec:
            continue
        try:
            kernel, ref = _load(kspec), _load(rspec)
            for w in wrap:  # this script's HBM wrapper of a kernel that takes SBUF state
                kernel = w(kernel)
        except Exception as e:  # noqa: BLE001
            for name, *_ in cases:
                print(f"| {kspec} | {name} | ERROR ({_first_missing(e)}) |")
                counts["ERROR"] += 1
            continue
        for name, make, atol, rtol, *lnc in cases:
            try:
                result = run_case(kernel, ref, make, atol, rtol, *lnc)
            except Exception as e:  # noqa: BLE001
                if os.environ.get("CHECK_NKI_LIBRARY_TRACE"):
                    traceback.print_exc()
                result = f"ERROR ({_first_missing(e)})"
            counts[result.split(" (")[0]] += 1
            if result.startswith("PASS"):
                passed.add(rspec.split(":")[0])
            print(f"| {kspec} | {name} | {result} |", flush=True)
    for mod in reference_modules(root):
        if mod in covered or only:
            continue
        kernel_mod = mod[:-len("_torch")] if mod.endswith("_torch") else mod
        kernel_mod = {"subkernels.rmsnorm": "subkernels.rmsnorm_tkg",
                      "subkernels.layernorm": "subkernels.layernorm_tkg",
                      "topk.torch_ref": "topk.rotational_topk",
                      "transformer.transformer_tkg": None}.get(kernel_mod, kernel_mod)
        if kernel_mod is None:
            counts["NOT RUN"] += 1
            print(f"| {mod} | - | NOT RUN (a reference with no kernel module of its name) |")
            continue
        try:
            importlib.import_module(PKG + mod)
            importlib.import_module(PKG + kernel_mod)
            why = "imports; no small case defined here"
        except Exception as e:  # noqa: BLE001
            why = "does not import: " + _first_missing(e)
        counts["NOT RUN"] += 1
        print(f"| {kernel_mod} | - | NOT RUN ({why}) |")
    print()
    print(", ".join(f"{k}: {v}" for k, v in counts.items()))
    refs = reference_modules(root)
    print(f"kernels with a torch reference: {len(refs)}; PASS on at least one case: "
          f"{len(passed)} ({100 * len(passed) // max(len(refs), 1)}%)")


if __name__ == "__main__":
    main()
