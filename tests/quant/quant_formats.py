#!/usr/bin/python3
"""Quantized weight formats in plain numpy, written from their specifications, not from archc's sources.

Encoders (to build checkpoints in the released formats) and decoders:
  * fine-grained FP8 (DeepSeek-V3/V3.1, Kimi-K2, Qwen3-FP8): float8_e4m3fn weight [out, in] and one float scale per
    128 x 128 block (`weight_scale_inv`, multiplied; edge blocks partial);
  * DeepSeek-V4: the same with ue8m0 scales (`.scale`, F8_E8M0: 2^(byte - 127)), and packed FP4 e2m1 experts
    [out, in/2] (element 2j in the low nibble of byte j) with one ue8m0 scale per 32 inputs;
  * gpt-oss MXFP4: `*_blocks` U8 [E, out, in/32, 16] and `*_scales` U8 [E, out, in/32];
  * ONNX Runtime's com.microsoft MatMulNBits / GatherBlockQuantized inputs (docs/ContribOperators.md): codes
    [N, blocks, block*bits/8] packed along K (low bits first), scales [N, blocks], zero points packed the same way
    or the default 2^(bits-1); value = (code - zero_point) * scale.
Safetensors I/O with the F8_E4M3 / F8_E8M0 / U8 / I8 / BF16 dtypes the releases use.
"""
import json
import struct

import numpy as np

# ---------------------------------------------------------------------------
# element formats
# ---------------------------------------------------------------------------


def e4m3_values():
    """float value of every float8_e4m3fn byte (NaN for 0x7F / 0xFF)."""
    out = np.zeros(256, np.float64)
    for b in range(256):
        s, e, m = b >> 7, (b >> 3) & 15, b & 7
        if e == 15 and m == 7:
            v = np.nan
        elif e == 0:
            v = m / 8 * 2.0 ** -6
        else:
            v = (1 + m / 8) * 2.0 ** (e - 7)
        out[b] = -v if s else v
    return out


E4M3 = e4m3_values()
_POS = np.array([b for b in range(127) if not np.isnan(E4M3[b])])  # 0x00..0x7E, ascending values
_POS_VALUES = E4M3[_POS]
E2M1 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0])


def encode_e4m3(x):
    """Nearest float8_e4m3fn (ties to the even code), saturating at +-448."""
    x = np.asarray(x, np.float64)
    a = np.minimum(np.abs(x), 448.0)
    i = np.clip(np.searchsorted(_POS_VALUES, a), 1, len(_POS_VALUES) - 1)
    lo, hi = _POS_VALUES[i - 1], _POS_VALUES[i]
    pick_hi = (hi - a < a - lo) | ((hi - a == a - lo) & (_POS[i] % 2 == 0))
    code = np.where(pick_hi, _POS[i], _POS[i - 1]).astype(np.uint8)
    return np.where(x < 0, code | 0x80, code).astype(np.uint8)


def encode_e2m1(x):
    """Nearest e2m1 nibble (0..6 magnitudes; ties to the even code), saturating at +-6."""
    x = np.asarray(x, np.float64)
    mags = E2M1[:8]
    d = np.abs(np.abs(x)[..., None] - mags)
    best = d.min(-1, keepdims=True)
    cand = np.where(d == best, np.arange(8), 99)
    even = np.where(cand % 2 == 0, cand, 99).min(-1)
    code = np.where(even < 99, even, cand.min(-1)).astype(np.uint8)
    return np.where((x < 0) & (code != 0), code | 8, code).astype(np.uint8)


def ue8m0_for(amax, qmax):
    """The power-of-two scale byte (2^(b-127)) so that amax / scale <= qmax."""
    amax = np.maximum(np.asarray(amax, np.float64), 1e-30)
    e = np.ceil(np.log2(amax / qmax))
    return np.clip(e + 127, 0, 254).astype(np.uint8)


def ue8m0_value(b):
    b = np.asarray(b)
    if np.any(b == 255):
        raise ValueError("NaN ue8m0 scale")
    return np.ldexp(1.0, b.astype(np.int64) - 127)


def bf16_round(x):
    """float32 -> bfloat16 bits (round to nearest even) as uint16."""
    u = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    return u.astype(np.uint16)


def bf16_value(bits):
    return (np.asarray(bits, np.uint32) << 16).view(np.float32).astype(np.float64)


# ---------------------------------------------------------------------------
# block formats: encode (build checkpoints) / decode (references)
# ---------------------------------------------------------------------------


def fp8_block_encode(w, block=(128, 128), ue8m0=False):
    """w [out, in] -> (e4m3 codes uint8 [out, in], scales [ceil(out/br), ceil(in/bc)]: float32 or ue8m0 bytes)."""
    out_, in_ = w.shape
    br, bc = block
    gr, gc = -(-out_ // br), -(-in_ // bc)
    codes = np.zeros(w.shape, np.uint8)
    scales = np.zeros((gr, gc), np.uint8 if ue8m0 else np.float32)
    for i in range(gr):
        for j in range(gc):
            blk = w[i * br:(i + 1) * br, j * bc:(j + 1) * bc].astype(np.float64)
            amax = np.abs(blk).max()
            if ue8m0:
                b = ue8m0_for(amax, 448.0)
                scales[i, j] = b
                s = float(ue8m0_value(b))
            else:
                s = float(np.float32(max(amax, 1e-12) / 448.0))
                scales[i, j] = s
            codes[i * br:(i + 1) * br, j * bc:(j + 1) * bc] = encode_e4m3(blk / s)
    return codes, scales


def fp8_block_decode(codes, scales, block=(128, 128)):
    br, bc = block
    s = ue8m0_value(scales) if scales.dtype == np.uint8 else scales.astype(np.float64)
    full = np.repeat(np.repeat(s, br, 0), bc, 1)[:codes.shape[0], :codes.shape[1]]
    return E4M3[codes] * full


def fp4_encode(w):
    """w [out, in] -> (packed int8 [out, ceil(in/2)], ue8m0 scales uint8 [out, ceil(in/32)])."""
    out_, in_ = w.shape
    g = -(-in_ // 32)
    pad = np.zeros((out_, g * 32))
    pad[:, :in_] = w
    blocks = pad.reshape(out_, g, 32)
    sb = ue8m0_for(np.abs(blocks).max(-1), 6.0)
    codes = encode_e2m1(blocks / ue8m0_value(sb)[..., None]).reshape(out_, g * 32)[:, :in_]
    if in_ % 2:
        codes = np.concatenate([codes, np.zeros((out_, 1), np.uint8)], 1)
    packed = (codes[:, 0::2] | (codes[:, 1::2] << 4)).astype(np.uint8)
    return packed.view(np.int8), sb


def fp4_decode(packed, scales, cols):
    p = packed.view(np.uint8)
    codes = np.zeros((p.shape[0], p.shape[1] * 2), np.uint8)
    codes[:, 0::2] = p & 15
    codes[:, 1::2] = p >> 4
    codes = codes[:, :cols]
    s = np.repeat(ue8m0_value(scales), 32, 1)[:, :cols]
    return E2M1[codes] * s


def mxfp4_encode(w):
    """w [E, out, in] (in % 32 == 0) -> (blocks uint8 [E, out, in/32, 16], scales uint8 [E, out, in/32])."""
    e, o, i = w.shape
    blocks = w.reshape(e, o, i // 32, 32).astype(np.float64)
    sb = ue8m0_for(np.abs(blocks).max(-1), 6.0)
    codes = encode_e2m1(blocks / ue8m0_value(sb)[..., None])
    packed = (codes[..., 0::2] | (codes[..., 1::2] << 4)).astype(np.uint8)
    return packed, sb


def mxfp4_decode(blocks, scales):
    e, o, g, _ = blocks.shape
    codes = np.zeros((e, o, g, 32), np.uint8)
    codes[..., 0::2] = blocks & 15
    codes[..., 1::2] = blocks >> 4
    return (E2M1[codes] * ue8m0_value(scales)[..., None]).reshape(e, o, g * 32)


def nbits_unpack(packed, bits, count):
    """Unpack `count` codes per row from bytes packed along the last axis (low bits first)."""
    packed = np.asarray(packed, np.uint8)
    if bits == 8:
        return packed[..., :count].astype(np.int64)
    per = 8 // bits
    mask = (1 << bits) - 1
    parts = [(packed >> (bits * j)) & mask for j in range(per)]
    codes = np.stack(parts, -1).reshape(packed.shape[:-1] + (packed.shape[-1] * per,))
    return codes[..., :count].astype(np.int64)


def matmulnbits_decode(b, scales, zero_points, n, k, bits, block):
    """MatMulNBits inputs -> W [N, K] (float64), per ContribOperators.md."""
    nb = -(-k // block)
    codes = nbits_unpack(b.reshape(n, nb, block * bits // 8), bits, block).reshape(n, nb * block)
    if zero_points is None:
        zp = np.full((n, nb), 2 ** (bits - 1), np.int64)
    else:
        zp = nbits_unpack(zero_points.reshape(n, -1), bits, nb)
    s = scales.astype(np.float64).reshape(n, nb)
    w = (codes - np.repeat(zp, block, 1)) * np.repeat(s, block, 1)
    return w[:, :k]


def round_to_nearest_error(w, bits, block, asymmetric, scale_dtype=np.float32):
    """Relative L2 error of plain round-to-nearest block quantization of W [N, K] along K at `bits`,
    blocks of `block` (zero-padded), the best of the textbook scale choices: symmetric, absmax / (2^(b-1) - 1)
    or the signed absmax mapped to -2^(b-1) (the full code range); asymmetric, (max - min) / (2^b - 1) with the
    block's range widened to hold 0 and a rounded zero point; scales rounded to `scale_dtype` (the precision the
    model stores them in) before rounding the values. The yardstick a quantizer's error is held to."""
    w = np.asarray(w, np.float64)
    n, k = w.shape
    nb = -(-k // block)
    x = np.zeros((n, nb * block))
    x[:, :k] = w
    x = x.reshape(n, nb, block)
    levels, mid = 2 ** bits, 2 ** (bits - 1)

    def err(deq):
        return float(np.linalg.norm((deq - x).reshape(n, -1)[:, :k]) / max(np.linalg.norm(w), 1e-30))

    if asymmetric:
        lo, hi = np.minimum(x.min(-1), 0.0), np.maximum(x.max(-1), 0.0)
        scale = ((hi - lo) / (levels - 1)).astype(scale_dtype).astype(np.float64)
        safe = np.where(scale > 0, scale, 1.0)[..., None]
        zp = np.clip(np.round(-lo[..., None] / safe), 0, levels - 1)
        q = np.clip(np.round(x / safe) + zp, 0, levels - 1)
        return err((q - zp) * safe * (scale[..., None] > 0))
    best = np.inf
    idx = np.abs(x).argmax(-1)[..., None]
    signed = np.take_along_axis(x, idx, -1)
    for scale in (np.abs(signed) / (mid - 1), signed / -mid):
        scale = scale.astype(scale_dtype).astype(np.float64)
        safe = np.where(scale != 0, scale, 1.0)
        q = np.clip(np.round(x / safe), -mid, mid - 1)
        best = min(best, err(q * safe * (scale != 0)))
    return best


def gather_block_quantized_decode(data, scales, zero_points, bits, block, cols):
    """GatherBlockQuantized (uint8 data packed along the last axis, quantize_axis 1) -> table [V, cols]."""
    v = data.shape[0]
    nb = scales.shape[1]
    codes = nbits_unpack(data, bits, nb * block)
    zp = np.full((v, nb), 2 ** (bits - 1), np.int64) if zero_points is None else \
        nbits_unpack(zero_points, bits, nb)
    w = (codes - np.repeat(zp, block, 1)) * np.repeat(scales.astype(np.float64), block, 1)
    return w[:, :cols]


# ---------------------------------------------------------------------------
# safetensors with the releases' dtypes
# ---------------------------------------------------------------------------
_NP = {"F32": np.float32, "F64": np.float64, "F16": np.float16, "I64": np.int64, "I32": np.int32,
       "I8": np.int8, "U8": np.uint8, "F8_E4M3": np.uint8, "F8_E8M0": np.uint8, "BF16": np.uint16}


def write_safetensors(path, tensors, metadata=None):
    """tensors: {name: (dtype name, array)} (raw bytes of F8/BF16 given as uint8/uint16 arrays)."""
    header = {}
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    blobs, off = [], 0
    for name in sorted(tensors):
        dt, arr = tensors[name]
        raw = np.ascontiguousarray(arr, dtype=_NP[dt]).tobytes()
        header[name] = {"dtype": dt, "shape": list(np.shape(arr)), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for raw in blobs:
            f.write(raw)


def read_safetensors(path):
    """{name: (dtype name, array)}; F8 / BF16 as raw uint8 / uint16."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    header.pop("__metadata__", None)
    out = {}
    for name, e in header.items():
        a, b = e["data_offsets"]
        out[name] = (e["dtype"], np.frombuffer(data[a:b], dtype=_NP[e["dtype"]]).reshape(e["shape"]))
    return out


def to_float(dtype, arr):
    """A plain (unquantized) tensor's values as float64 (integers unchanged)."""
    if dtype == "BF16":
        return bf16_value(arr)
    if dtype in ("F32", "F64", "F16"):
        return arr.astype(np.float64)
    return arr
