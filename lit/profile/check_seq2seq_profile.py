#!/usr/bin/env python3
"""Checks an encoder-decoder's profile JSON against its config.json by hand:
the self- and cross-attention cache bytes per decoded token and per encoder
position, each phase's KV bytes (past + 1 decoded tokens and the encoder
positions, per sequence of the batch), and that a cached decode step skips
exactly the cross-attention projections the first step computes
(first_step MACs - decode MACs at past 0 = decoder layers x batch x encoder
positions x d_model x inner x 2, for K and V). Whisper: the encoder window
is 2 x max_source_positions frames = 30 s, and the encoder cost per second
of audio is the window's over 30. Prints "ok" or the first mismatch.
Usage: check_seq2seq_profile.py PROFILE.json CONFIG.json [KV_BITS]"""
import json
import math
import sys


def fail(msg):
    print("check_seq2seq_profile: " + msg)
    sys.exit(1)


def close(a, b, what):
    if not math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-9):
        fail("%s: %r, expected %r" % (what, a, b))


def main():
    p = json.load(open(sys.argv[1]))
    cfg = json.load(open(sys.argv[2]))
    kv_bits = float(sys.argv[3]) if len(sys.argv) > 3 else 16.0
    m = p["model"]
    if cfg.get("model_type") == "t5" or "d_kv" in cfg:
        layers = cfg.get("num_decoder_layers") or cfg["num_layers"]
        inner = cfg["num_heads"] * cfg["d_kv"]
        width = cfg["d_model"]
    else:
        layers = cfg["decoder_layers"]
        inner = width = cfg["d_model"]
    per_position = layers * 2 * inner * kv_bits / 8
    close(m["kv_bytes_per_token"], per_position, "self KV bytes / token")
    close(m["cross_kv_bytes_per_encoder_position"], per_position,
          "cross KV bytes / encoder position")
    speech = cfg.get("model_type") == "whisper"
    if speech:
        if m["kind"] != "speech":
            fail("kind %s" % m["kind"])
        close(m["audio_window_frames"], 2 * cfg["max_source_positions"],
              "audio window frames")
        close(m["audio_window_s"], 30.0, "audio window seconds")
    elif m["kind"] != "encoder-decoder":
        fail("kind %s" % m["kind"])
    for pt in p["points"]:
        b = pt["batch"]
        enc = cfg["max_source_positions"] if speech else pt["seq"]
        close(pt["encode"]["kv_bytes"], 0, "encode KV bytes")
        first = pt["first_step"]
        close(first["encoder_positions"], enc, "first_step encoder positions")
        close(first["kv_bytes"], b * (1 + enc) * per_position,
              "first_step KV bytes")
        for d in pt["decode"]:
            close(d["kv_bytes"], b * (d["past"] + 1 + enc) * per_position,
                  "decode KV bytes at past %d" % d["past"])
            if d["past"] == 0:
                close(first["cost"]["macs"] - d["cost"]["macs"],
                      layers * b * enc * width * inner * 2,
                      "cross-attention projections of the first step")
        for dev, t in pt["ttft_s"].items():
            close(t, pt["encode"]["devices"][dev]["time_s"] +
                  first["devices"][dev]["time_s"], "TTFT on " + dev)
            if speech:
                close(pt["encode_per_second_of_audio"]["time_s"][dev],
                      pt["encode"]["devices"][dev]["time_s"] / 30.0,
                      "encoder time per second of audio on " + dev)
    print("ok")


if __name__ == "__main__":
    main()
