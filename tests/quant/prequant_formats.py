#!/usr/bin/python3
"""GPTQ, AWQ and compressed-tensors weight formats in plain numpy, written from ../shared/docs/prequant-formats.md
(the on-disk layouts of AutoGPTQ / GPTQModel, AutoAWQ GEMM and compressed-tensors), not from archc's sources.

Decoders (checkpoint tensors -> the dequantized [out, in] weight the model computes with) and encoders (a float
weight quantized the way each tool does it -> the tensors it writes), for tests/quant/make_prequant_checkpoint.py
and tests/quant/run_prequant_case.py:
  * GPTQ: qweight I32 [in*b/32, out] packed along the inputs (a dense little-endian bit stream per column: 3-bit codes
    straddle words), qzeros I32 [G, out*b/32] packed along the outputs, v1 (`checkpoint_format: gptq`) storing
    zero - 1 with GPTQModel's word-level subtraction (read back with its word-level add; 3-bit field by field),
    scales F16 [G, out], g_idx I32 [in]; W[o, i] = (q[i, o] - z[g_idx[i], o]) * s[g_idx[i], o];
  * AWQ GEMM: qweight I32 [in, out/8] and qzeros I32 [G, out/8] with the nibble order [0, 2, 4, 6, 1, 3, 5, 7]
    (nibble j of word c holds output 8c + order[j]), scales F16 [G, out];
  * compressed-tensors pack-quantized: weight_packed I32 [out, ceil(in*b/32)] of signed codes + 2^(b-1) packed along
    the inputs, weight_scale [out, G] / [out, 1] / [1], weight_zero_point I32 [ceil(out*b/32), G] (signed + 2^(b-1),
    packed along the outputs) or the legacy unpacked I8 [out, G], weight_shape I64 [2], weight_g_idx;
  * compressed-tensors float-quantized: weight F8_E4M3 [out, in] times weight_scale per tensor / channel / block.
"""
import numpy as np

import quant_formats as qf

AWQ_ORDER = [0, 2, 4, 6, 1, 3, 5, 7]
V1_OFFSET = {2: 0x55555555, 4: 0x11111111, 8: 0x01010101}


# ---------------------------------------------------------------------------
# bit streams of int32 words
# ---------------------------------------------------------------------------

def pack_stream(values, bits, axis):
    """Unsigned values (each < 2^bits) packed densely low-first along `axis` into uint32 words (the other axis kept):
    element j at bit j*bits of the stream (little-endian words)."""
    v = np.moveaxis(np.asarray(values, np.uint64), axis, 0)
    n = v.shape[0]
    words = -(-n * bits // 32)
    out = np.zeros((words,) + v.shape[1:], np.uint64)
    for j in range(n):
        pos = j * bits
        k, off = pos // 32, pos % 32
        out[k] |= (v[j] << np.uint64(off)) & np.uint64(0xFFFFFFFF)
        if off + bits > 32:
            out[k + 1] |= v[j] >> np.uint64(32 - off)
    return np.moveaxis(out.astype(np.uint32), 0, axis)


def unpack_stream(words, bits, count, axis):
    """The inverse of pack_stream: `count` values along `axis`."""
    w = np.moveaxis(np.asarray(words).view(np.uint32).astype(np.uint64), axis, 0)
    out = np.zeros((count,) + w.shape[1:], np.int64)
    mask = np.uint64((1 << bits) - 1)
    for j in range(count):
        pos = j * bits
        k, off = pos // 32, pos % 32
        v = w[k] >> np.uint64(off)
        if off + bits > 32:
            v |= w[k + 1] << np.uint64(32 - off)
        out[j] = (v & mask).astype(np.int64)
    return np.moveaxis(out, 0, axis)


def as_i32(words):
    return np.asarray(words, np.uint32).view(np.int32)


# ---------------------------------------------------------------------------
# GPTQ
# ---------------------------------------------------------------------------

def gptq_encode(w, bits, group, sym, act_order_perm=None, v1=True, static_groups=False, force_zero=None):
    """w [out, in] -> GPTQ tensors (qweight, qzeros, scales f16, g_idx) and the dequantized weight. group -1: one
    group per row. act_order_perm: the column order GPTQ quantized in (groups formed along it, codes stored in the
    original order, g_idx[perm[j]] = j // group). force_zero: (group, output) pairs whose zero point is made 0 (an
    asymmetric zero the v1 word-level subtraction borrows through)."""
    out_, in_ = w.shape
    gs = in_ if group == -1 else group
    ngroups = -(-in_ // gs)
    order = np.arange(in_) if act_order_perm is None or static_groups else np.asarray(act_order_perm)
    g_idx = np.zeros(in_, np.int32)
    g_idx[order] = np.arange(in_) // gs
    maxq = 2 ** bits - 1
    scales = np.zeros((ngroups, out_), np.float16)
    zeros = np.zeros((ngroups, out_), np.int64)
    for g in range(ngroups):
        cols = w[:, g_idx == g].astype(np.float64)
        lo, hi = np.minimum(cols.min(1), 0.0), np.maximum(cols.max(1), 0.0)
        if sym:
            amax = np.maximum(np.abs(lo), hi)
            s = 2 * amax / maxq
            z = np.full(out_, 2 ** (bits - 1))
        else:
            s = (hi - lo) / maxq
            z = np.clip(np.round(-lo / np.where(s > 0, s, 1)), 0, maxq)
        s = np.where(s > 0, s, 1e-4).astype(np.float16)
        scales[g] = s
        zeros[g] = z
    if force_zero:
        for g, o in force_zero:
            zeros[g, o] = 0
    s = scales.astype(np.float64)[g_idx].T                    # [out, in]
    z = zeros[g_idx].T
    q = np.clip(np.round(w / s) + z, 0, maxq).astype(np.int64)
    deq = (q - z) * s
    qweight = pack_stream(q.T, bits, 0)                       # [in*b/32, out]
    if v1:
        if bits == 3:
            stored = (zeros - 1) & maxq                       # field by field
            qzeros = pack_stream(stored, bits, 1)
        else:
            qzeros = (pack_stream(zeros, bits, 1).astype(np.uint64) - V1_OFFSET[bits]) & 0xFFFFFFFF
            qzeros = qzeros.astype(np.uint32)
    else:
        qzeros = pack_stream(zeros, bits, 1)
    return dict(qweight=as_i32(qweight), qzeros=as_i32(qzeros), scales=scales, g_idx=g_idx), deq


def gptq_decode(t, bits, out_, in_, group, v1=True):
    """{qweight, qzeros, scales[, g_idx]} -> W [out, in] float64."""
    gs = in_ if group == -1 else group
    q = unpack_stream(t["qweight"], bits, in_, 0).T          # [out, in]
    ngroups = t["scales"].shape[0]
    if v1 and bits != 3:
        words = (np.asarray(t["qzeros"]).view(np.uint32).astype(np.uint64) + V1_OFFSET[bits]) & 0xFFFFFFFF
        z = unpack_stream(words.astype(np.uint32), bits, out_, 1)
    else:
        z = unpack_stream(t["qzeros"], bits, out_, 1)
        if v1:
            z = (z + 1) & (2 ** bits - 1)
    g_idx = t.get("g_idx")
    g_idx = np.arange(in_) // gs if g_idx is None else np.asarray(g_idx, np.int64)
    assert z.shape == (ngroups, out_)
    s = qf.to_float("F16", t["scales"]) if t["scales"].dtype == np.float16 else np.asarray(t["scales"], np.float64)
    return (q - z[g_idx].T) * s[g_idx].T


# ---------------------------------------------------------------------------
# AWQ (GEMM)
# ---------------------------------------------------------------------------

def awq_pack(values):
    """[rows, out] 4-bit values -> [rows, out/8] int32 with AWQ's interleave."""
    v = np.asarray(values, np.uint32)
    rows, out_ = v.shape
    words = np.zeros((rows, out_ // 8), np.uint32)
    for j, o in enumerate(AWQ_ORDER):
        words |= v[:, o::8] << np.uint32(4 * j)
    return as_i32(words)


def awq_unpack(words, out_):
    w = np.asarray(words).view(np.uint32)
    v = np.zeros((w.shape[0], out_), np.int64)
    for j, o in enumerate(AWQ_ORDER):
        v[:, o::8] = (w >> np.uint32(4 * j)) & 15
    return v


def awq_encode(w, group):
    """AutoAWQ's quantizer: zero-point per group of `group` inputs, scale (max - min) / 15 (clamped 1e-5)."""
    out_, in_ = w.shape
    gs = in_ if group == -1 else group
    g = w.reshape(out_, in_ // gs, gs).astype(np.float64)
    mx, mn = g.max(-1), g.min(-1)
    s = (np.maximum(mx - mn, 1e-5) / 15).astype(np.float16)
    sf = s.astype(np.float64)
    z = np.clip(-np.round(mn / sf), 0, 15)
    q = np.clip(np.round(g / sf[..., None]) + z[..., None], 0, 15).astype(np.int64)
    deq = ((q - z[..., None]) * sf[..., None]).reshape(out_, in_)
    q = q.reshape(out_, in_)
    return dict(qweight=awq_pack(q.T), qzeros=awq_pack(z.T.astype(np.int64)), scales=s.T.copy()), deq


def awq_decode(t, out_, in_):
    q = awq_unpack(t["qweight"], out_)                        # [in, out]
    z = awq_unpack(t["qzeros"], out_)                         # [G, out]
    s = np.asarray(t["scales"], np.float64)                   # [G, out]
    gs = in_ // s.shape[0]
    g = np.arange(in_) // gs
    return ((q - z[g]) * s[g]).T


# ---------------------------------------------------------------------------
# compressed-tensors
# ---------------------------------------------------------------------------

def ct_pack_encode(w, bits, strategy, group=None, sym=True, scale_dtype="BF16", legacy_zp=False, g_perm=None):
    """pack-quantized: w [out, in] -> ({weight_packed, weight_scale, [weight_zero_point], weight_shape,
    [weight_g_idx]} as (dtype, array), dequantized W). strategy group / channel / tensor. g_perm: actorder group
    (groups formed along the permutation, g_idx stored)."""
    out_, in_ = w.shape
    gs = group if strategy == "group" else in_
    order = np.arange(in_) if g_perm is None else np.asarray(g_perm)
    g_idx = np.zeros(in_, np.int64)
    g_idx[order] = np.arange(in_) // gs
    ngroups = -(-in_ // gs)
    half, top = 2 ** (bits - 1), 2 ** (bits - 1) - 1
    scales = np.zeros((out_, ngroups))
    zps = np.zeros((out_, ngroups), np.int64)
    for g in range(ngroups):
        cols = w[:, g_idx == g].astype(np.float64)
        if strategy == "tensor":
            cols = w.astype(np.float64).reshape(1, -1).repeat(out_, 0)
        lo, hi = np.minimum(cols.min(1), 0.0), np.maximum(cols.max(1), 0.0)
        if sym:
            s = np.maximum(np.abs(lo), hi) / half
            z = np.zeros(out_)
        else:
            s = (hi - lo) / (2 ** bits - 1)
            z = np.clip(np.round(-half - lo / np.where(s > 0, s, 1)), -half, top)
        scales[:, g] = np.where(s > 0, s, 1e-4)
        zps[:, g] = z
    bits16 = qf.bf16_round(scales) if scale_dtype == "BF16" else None
    sval = qf.bf16_value(bits16) if scale_dtype == "BF16" else scales.astype(np.float16).astype(np.float64)
    s_full, z_full = sval[:, g_idx], zps[:, g_idx]
    q = np.clip(np.round(w / s_full) + z_full, -half, top).astype(np.int64)
    deq = (q - z_full) * s_full
    packed = as_i32(pack_stream(q + half, bits, 1))
    t = {"weight_packed": ("I32", packed), "weight_shape": ("I64", np.array([out_, in_], np.int64))}
    if strategy == "tensor":
        sv = (bits16 if scale_dtype == "BF16" else scales.astype(np.float16))[:1, :1].reshape(1)
    else:
        sv = bits16 if scale_dtype == "BF16" else scales.astype(np.float16)
    t["weight_scale"] = (scale_dtype, sv)
    if not sym:
        if legacy_zp:
            t["weight_zero_point"] = ("I8", zps.astype(np.int8))
        else:
            t["weight_zero_point"] = ("I32", as_i32(pack_stream(zps + half, bits, 0)))
    if g_perm is not None:
        t["weight_g_idx"] = ("I32", g_idx.astype(np.int32))
    return t, deq


def ct_pack_decode(t, bits, out_, in_, sym):
    """{name suffix: (dtype, array)} -> W [out, in]."""
    half = 2 ** (bits - 1)
    q = unpack_stream(t["weight_packed"][1], bits, in_, 1) - half
    sdt, s = t["weight_scale"]
    s = qf.to_float(sdt, s).reshape(out_ if s.size > 1 else 1, -1)
    if s.shape[0] == 1:
        s = np.full((out_, 1), s[0, 0])
    ngroups = s.shape[1]
    gi = t.get("weight_g_idx")
    g_idx = np.asarray(gi[1], np.int64) if gi else np.arange(in_) // (-(-in_ // ngroups))
    if sym:
        z = np.zeros((out_, ngroups), np.int64)
    else:
        zdt, za = t["weight_zero_point"]
        if zdt == "I32" and za.shape == (-(-out_ * bits // 32), ngroups):
            z = unpack_stream(za, bits, out_, 0) - half
        else:
            z = np.asarray(za, np.int64).reshape(out_, ngroups)
    return (q - z[:, g_idx]) * s[:, g_idx]


def ct_fp8_encode(w, strategy, block=(128, 128), scale_dtype="BF16"):
    """float-quantized FP8: w [out, in] -> ({weight: F8_E4M3, weight_scale}, dequantized W)."""
    out_, in_ = w.shape
    if strategy == "block":
        codes, scales = qf.fp8_block_encode(w, block)
        if scale_dtype == "BF16":
            scales = qf.bf16_value(qf.bf16_round(scales)).astype(np.float32)
            codes = qf.encode_e4m3(w / np.repeat(np.repeat(scales.astype(np.float64), block[0], 0), block[1],
                                                1)[:out_, :in_])
        deq = qf.fp8_block_decode(codes, scales.astype(np.float64), block)
        stored = qf.bf16_round(scales) if scale_dtype == "BF16" else scales.astype(np.float32)
        return {"weight": ("F8_E4M3", codes), "weight_scale": (scale_dtype, stored)}, deq
    if strategy == "channel":
        amax = np.abs(w).max(1, keepdims=True)
    else:
        amax = np.full((1, 1), np.abs(w).max())
    s = np.maximum(amax, 1e-12) / 448.0
    if scale_dtype == "BF16":
        sb = qf.bf16_round(s)
        s = qf.bf16_value(sb)
    else:
        s = s.astype(np.float32).astype(np.float64)
        sb = s.astype(np.float32)
    codes = qf.encode_e4m3(w / s)
    deq = qf.E4M3[codes] * s
    stored = sb if strategy == "channel" else sb.reshape(1)
    return {"weight": ("F8_E4M3", codes), "weight_scale": (scale_dtype, stored)}, deq


def ct_fp8_decode(t, out_, in_, block=None):
    """{weight, weight_scale} -> W [out, in]; `block` [rows, cols] for the block strategy."""
    codes = t["weight"][1]
    sdt, s = t["weight_scale"]
    s = qf.to_float(sdt, s)
    if s.size == 1:
        return qf.E4M3[codes] * float(s.reshape(-1)[0])
    if s.shape == (out_, 1):
        return qf.E4M3[codes] * s
    return qf.fp8_block_decode(codes, s, tuple(block))


# ---------------------------------------------------------------------------
# a whole checkpoint
# ---------------------------------------------------------------------------

def _re_match(pattern, name):
    import re
    return re.match(pattern, name) is not None


def module_scheme(qc, module):
    """The config's scheme of `module`: None (float) or dict(bits, group, sym, format, ...), by the rules of each
    tool: GPTQModel `dynamic` (first match; '-:' skips), lm_head; AWQ modules_to_not_convert (substring);
    compressed-tensors ignore, then config_groups targets ('Linear', 're:' re.match, exact names)."""
    method = qc["quant_method"]
    if method == "gptq":
        base = dict(bits=qc["bits"], group=qc.get("group_size", 128), sym=qc.get("sym", True), format="gptq")
        if module == "lm_head" and not qc.get("lm_head", False):
            return None
        for pat, over in (qc.get("dynamic") or {}).items():
            if pat.startswith("-:"):
                if _re_match(pat[2:], module):
                    return None
            elif _re_match(pat[2:] if pat.startswith("+:") else pat, module):
                return dict(base, bits=over.get("bits", base["bits"]), group=over.get("group_size", base["group"]),
                            sym=over.get("sym", base["sym"]))
        return base
    if method == "awq":
        if module == "lm_head" or any(m in module for m in (qc.get("modules_to_not_convert") or [])):
            return None
        return dict(bits=4, group=qc.get("group_size", 128), sym=False, format="awq")

    def match(entry):
        if entry.startswith("re:"):
            return _re_match(entry[3:], module)
        return entry == "Linear" or entry == module
    if any(match(e) for e in qc.get("ignore") or []):
        return None
    for g in qc["config_groups"].values():
        if any(match(t) for t in g["targets"]):
            w = g["weights"]
            return dict(bits=w["num_bits"], group=w.get("group_size"), sym=w["symmetric"],
                        strategy=w["strategy"], block=w.get("block_structure"),
                        format=g.get("format", qc.get("format")))
    return None


def logical_weights(tensors, cfg):
    """{name: (dtype, array)} of a GPTQ / AWQ / compressed-tensors checkpoint -> ({logical name: float64 array or
    int array}, {logical names stored as integer codes})."""
    qc = cfg["quantization_config"]
    method = qc["quant_method"]
    out, packed, used = {}, set(), set()
    for name, (dt, arr) in tensors.items():
        for suffix in (".qweight", ".weight_packed"):
            if not name.endswith(suffix):
                continue
            module = name[:-len(suffix)]
            sc = module_scheme(qc, module)
            if sc is None:
                raise ValueError(f"{name}: the config leaves {module} float")
            t = {k[len(module) + 1:]: v for k, v in tensors.items() if k.startswith(module + ".")}
            used.update(module + "." + k for k in t if k != "bias")
            bits = sc["bits"]
            if method == "gptq":
                in_, out_ = arr.shape[0] * 32 // bits, arr.shape[1]
                w = gptq_decode({k: v[1] for k, v in t.items()}, bits, out_, in_, sc["group"],
                                v1=qc.get("checkpoint_format", qc.get("format", "gptq")) == "gptq")
            elif method == "awq":
                in_, out_ = arr.shape[0], arr.shape[1] * 8
                w = awq_decode({k: v[1] for k, v in t.items()}, out_, in_)
            else:
                out_, in_ = (int(x) for x in t["weight_shape"][1])
                w = ct_pack_decode(t, bits, out_, in_, "weight_zero_point" not in t)
            out[module + ".weight"] = w
            packed.add(module + ".weight")
    for name, (dt, arr) in tensors.items():
        if name in used or name in out:
            continue
        if dt == "F8_E4M3":
            module = name[:-len(".weight")]
            sc = module_scheme(qc, module)
            t = {"weight": (dt, arr), "weight_scale": tensors[module + ".weight_scale"]}
            used.add(module + ".weight_scale")
            out[name] = ct_fp8_decode(t, arr.shape[0], arr.shape[1], sc.get("block"))
            continue
        if name.endswith(".weight_scale") and name[:-len("_scale")] in tensors:
            continue
        out[name] = qf.to_float(dt, arr)
    for k in used:
        out.pop(k, None)
    return out, packed
