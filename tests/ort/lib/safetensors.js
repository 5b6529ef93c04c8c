// Minimal safetensors reader/writer for the ORT tests (F32, I64, F16, BF16).
'use strict';
const fs = require('fs');

const SIZES = { F32: 4, F16: 2, BF16: 2, I64: 8, I32: 4, F64: 8 };

function readSafetensors(path) {
  const buf = fs.readFileSync(path);
  const n = Number(buf.readBigUInt64LE(0));
  const header = JSON.parse(buf.subarray(8, 8 + n).toString('utf8'));
  const base = 8 + n;
  const out = { tensors: {}, metadata: header.__metadata__ || {} };
  for (const [name, info] of Object.entries(header)) {
    if (name === '__metadata__') continue;
    const [b, e] = info.data_offsets;
    const bytes = buf.subarray(base + b, base + e);
    const copy = new Uint8Array(bytes.length);
    copy.set(bytes);
    let data;
    switch (info.dtype) {
      case 'F32': data = new Float32Array(copy.buffer); break;
      case 'I64': data = new BigInt64Array(copy.buffer); break;
      case 'I32': data = new Int32Array(copy.buffer); break;
      case 'F64': data = new Float64Array(copy.buffer); break;
      default: data = copy;
    }
    out.tensors[name] = { dtype: info.dtype, shape: info.shape, data };
  }
  return out;
}

// Writes tensors {name: {dtype, shape, data(TypedArray)}} to a file.
function writeSafetensors(path, tensors, metadata) {
  const header = {};
  if (metadata) header.__metadata__ = metadata;
  const parts = [];
  let offset = 0;
  for (const name of Object.keys(tensors).sort()) {
    const t = tensors[name];
    const bytes = Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength);
    header[name] = { dtype: t.dtype, shape: t.shape, data_offsets: [offset, offset + bytes.length] };
    parts.push(bytes);
    offset += bytes.length;
  }
  let json = JSON.stringify(header);
  while ((8 + Buffer.byteLength(json)) % 8 !== 0) json += ' ';
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(Buffer.byteLength(json)));
  fs.writeFileSync(path, Buffer.concat([len, Buffer.from(json), ...parts]));
}

module.exports = { readSafetensors, writeSafetensors, SIZES };
