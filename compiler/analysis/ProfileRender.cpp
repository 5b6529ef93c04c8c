//===- ProfileRender.cpp - The views of a profile document ----------------===//
//
// This file renders the profile's JSON document (ProfileReport.cpp) as the
// table, Markdown and CSV views: renderings of one document, so they can
// never disagree with it.
//
//===----------------------------------------------------------------------===//
#include "analysis/ProfileReport.h"

#include <fmt/format.h>

#include <cmath>

namespace archc {

using json = nlohmann::ordered_json;

namespace {

std::string withCommas(double v) {
  std::string s = fmt::format("{:.0f}", v);
  std::string out;
  int n = 0;
  for (auto it = s.rbegin(); it != s.rend(); ++it) {
    if (n && n % 3 == 0 && *it != '-')
      out.insert(out.begin(), ',');
    out.insert(out.begin(), *it);
    ++n;
  }
  return out;
}

std::string si(double v, const char *unit) {
  static const char *prefixes[] = {"", "K", "M", "G", "T", "P", "E"};
  int i = 0;
  double a = std::fabs(v);
  while (a >= 1000 && i < 6) {
    a /= 1000;
    v /= 1000;
    ++i;
  }
  return fmt::format("{:.{}f} {}{}", v, i == 0 ? 0 : 2, prefixes[i], unit);
}

std::string seconds(double s) {
  if (s >= 1)
    return fmt::format("{:.3f} s", s);
  if (s >= 1e-3)
    return fmt::format("{:.3f} ms", s * 1e3);
  return fmt::format("{:.2f} us", s * 1e6);
}

struct Table {
  std::vector<std::vector<std::string>> rows;
  void print(std::ostream &os, bool markdown) const {
    std::vector<size_t> w;
    for (const auto &r : rows)
      for (size_t i = 0; i < r.size(); ++i) {
        if (w.size() <= i)
          w.push_back(0);
        w[i] = std::max(w[i], r[i].size());
      }
    for (size_t ri = 0; ri < rows.size(); ++ri) {
      const auto &r = rows[ri];
      std::string line = markdown ? "|" : "";
      for (size_t i = 0; i < r.size(); ++i) {
        std::string cell = r[i];
        bool left = i == 0;
        std::string pad(w[i] - cell.size(), ' ');
        cell = left ? cell + pad : pad + cell;
        line += markdown ? " " + cell + " |" : (i ? "  " : "") + cell;
      }
      os << line << "\n";
      if (ri == 0) {
        std::string sep = markdown ? "|" : "";
        for (size_t i = 0; i < r.size(); ++i)
          sep += markdown ? std::string(i == 0 ? ":" : "-") +
                                std::string(w[i], '-') +
                                std::string(i == 0 ? "-|" : ":|")
                          : (i ? "  " : "") + std::string(w[i], '-');
        os << sep << "\n";
      }
    }
  }
};

void renderText(const json &p, bool perOp, std::ostream &os, bool markdown) {
  const json &m = p["model"];
  const json &rt = p["runtime"];
  auto h = [&](const std::string &s) {
    os << (markdown ? "### " : "") << s << "\n";
  };
  os << (markdown ? "## " : "")
     << "archc profile: " << m["arch"].get<std::string>() << " ("
     << m["config"].get<std::string>() << ")\n";
  os << (markdown ? "\n" : "");
  os << "latency model: " << p["latency_model"].get<std::string>() << "\n";
  os << fmt::format(
      "runtime '{}': {} matmuls, weights {} bits, activations {} "
      "bits, KV {} bits, efficiency compute {} / memory {}, "
      "tensor parallel {}\n\n",
      rt["name"].get<std::string>(), rt["compute"].get<std::string>(),
      rt["effective_weight_bits"].get<double>(),
      rt["activation_bits"].get<double>(), rt["kv_bits"].get<double>(),
      rt["compute_efficiency"].get<double>(),
      rt["memory_efficiency"].get<double>(),
      rt["tensor_parallel"].get<int64_t>());
  Table facts;
  facts.rows.push_back({"model", "value"});
  facts.rows.push_back({"parameters", withCommas(m["params"].get<double>())});
  facts.rows.push_back(
      {"weight tensors", withCommas(m["weight_tensors"].get<double>())});
  facts.rows.push_back(
      {"activated parameters / token",
       withCommas(m["activated_params_per_token"].get<double>())});
  facts.rows.push_back(
      {"weight bytes", withCommas(m["weight_bytes"].get<double>())});
  std::string kind = m.value("kind", "decoder");
  if (kind != "encoder")
    facts.rows.push_back({kind == "decoder" || kind == "vision-language"
                              ? "KV/state bytes / token"
                              : "self-attention KV bytes / token",
                          withCommas(m["kv_bytes_per_token"].get<double>())});
  if (m.contains("cross_kv_bytes_per_encoder_position"))
    facts.rows.push_back(
        {"cross-attention KV bytes / encoder position",
         withCommas(m["cross_kv_bytes_per_encoder_position"].get<double>())});
  if (m.contains("audio_window_frames"))
    facts.rows.push_back(
        {"audio window", fmt::format("{} frames = {} s",
                                     m["audio_window_frames"].get<int64_t>(),
                                     m["audio_window_s"].get<double>())});
  if (m["state_bytes_per_sequence"].get<double>() > 0)
    facts.rows.push_back(
        {"constant state bytes / sequence",
         withCommas(m["state_bytes_per_sequence"].get<double>())});
  facts.rows.push_back({"layers", withCommas(m["layers"].get<double>())});
  facts.print(os, markdown);
  os << "\n";
  if (p.contains("vision")) {
    const json &v = p["vision"];
    const json &img = v["per_image"];
    Table vt;
    vt.rows.push_back({"vision encoder", "value"});
    vt.rows.push_back({"parameters", withCommas(v["params"].get<double>())});
    vt.rows.push_back(
        {"image size",
         fmt::format("{0} x {0}", v["image_size"].get<int64_t>())});
    vt.rows.push_back({"image tokens / image",
                       withCommas(v["image_tokens_per_image"].get<double>())});
    vt.rows.push_back(
        {"MACs / image", si(img["cost"]["macs"].get<double>(), "")});
    vt.rows.push_back(
        {"FLOPs / image", si(img["cost"]["flops"].get<double>(), "")});
    vt.rows.push_back(
        {"bytes / image", si(img["cost"]["bytes"].get<double>(), "B")});
    for (const json &d : p["devices"]) {
      std::string id = d["id"].get<std::string>();
      vt.rows.push_back({id + " time / image",
                         seconds(img["devices"][id]["time_s"].get<double>())});
    }
    vt.print(os, markdown);
    os << "\n";
    Table tt;
    std::vector<std::string> head = {"batch", "text tokens", "images",
                                     "prompt tokens"};
    for (const json &d : p["devices"]) {
      std::string id = d["id"].get<std::string>();
      head.push_back(id + " vision");
      head.push_back(id + " prefill");
      head.push_back(id + " TTFT");
    }
    tt.rows.push_back(head);
    for (const json &pt : v["with_images"]) {
      std::vector<std::string> r = {
          std::to_string(pt["batch"].get<int64_t>()),
          std::to_string(pt["seq"].get<int64_t>()),
          std::to_string(pt["images"].get<int64_t>()),
          std::to_string(pt["prompt_tokens"].get<int64_t>())};
      for (const json &d : p["devices"]) {
        std::string id = d["id"].get<std::string>();
        r.push_back(
            seconds(pt["vision"]["devices"][id]["time_s"].get<double>()));
        r.push_back(
            seconds(pt["prefill"]["devices"][id]["time_s"].get<double>()));
        r.push_back(seconds(pt["ttft_s"][id].get<double>()));
      }
      tt.rows.push_back(r);
    }
    h("TTFT of a prompt with images (vision encoder + prefill of text and "
      "image tokens, per sequence's images)");
    tt.print(os, markdown);
    os << "\n";
  }

  const json &devices = p["devices"];
  Table t;
  std::vector<std::string> head = {"phase", "batch",    "seq",
                                   "past",  "MACs",     "FLOPs",
                                   "bytes", "KV bytes", "activated params"};
  for (const json &d : devices) {
    std::string id = d["id"].get<std::string>();
    head.push_back(id + " time");
    head.push_back(id + " bound");
    head.push_back(id + " tok/s");
    head.push_back(id + " fits");
  }
  t.rows.push_back(head);
  auto addPhase = [&](const json &ph) {
    std::vector<std::string> r = {
        ph["phase"].get<std::string>(),
        std::to_string(ph["batch"].get<int64_t>()),
        std::to_string(ph["seq"].get<int64_t>()),
        std::to_string(ph["past"].get<int64_t>()),
        si(ph["cost"]["macs"].get<double>(), ""),
        si(ph["cost"]["flops"].get<double>(), ""),
        si(ph["cost"]["bytes"].get<double>(), "B"),
        si(ph["kv_bytes"].get<double>(), "B"),
        si(ph["activated_params_expected"].get<double>(), "")};
    for (const json &d : devices) {
      const json &dt = ph["devices"][d["id"].get<std::string>()];
      r.push_back(seconds(dt["time_s"].get<double>()));
      r.push_back(fmt::format(
          "{} {:.0f}%", dt["bound"].get<std::string>(),
          100 * (dt["bound"] == "memory"
                     ? dt["memory_bound_fraction"].get<double>()
                     : 1 - dt["memory_bound_fraction"].get<double>())));
      r.push_back(fmt::format("{:.1f}", dt["tokens_per_s"].get<double>()));
      r.push_back(dt["fits"].get<bool>() ? "yes" : "no");
    }
    t.rows.push_back(r);
  };
  for (const json &pt : p["points"]) {
    for (const char *key : {"forward", "encode", "first_step", "prefill"})
      if (pt.contains(key))
        addPhase(pt[key]);
    if (pt.contains("decode"))
      for (const json &dph : pt["decode"])
        addPhase(dph);
  }
  if (kind == "encoder")
    h("phases (forward = one call over batch x seq tokens)");
  else if (kind == "encoder-decoder" || kind == "speech")
    h(std::string("phases (encode = the encoder over the ") +
      (kind == "speech" ? "audio window" : "seq source tokens") +
      ", once per sequence; first_step = the first decoder token, computing "
      "the cross-attention keys and values; TTFT = encode + first_step; "
      "decode = one token, past tokens and the encoder positions cached)");
  else
    h("phases (prefill = TTFT; decode = one token, time per output token)");
  t.print(os, markdown);
  os << "\n";

  if (kind == "encoder-decoder" || kind == "speech") {
    Table tt;
    std::vector<std::string> head = {"batch", "seq"};
    for (const json &d : devices) {
      head.push_back(d["id"].get<std::string>() + " TTFT");
      if (kind == "speech")
        head.push_back(d["id"].get<std::string>() +
                       " encoder time / s of audio");
    }
    tt.rows.push_back(head);
    for (const json &pt : p["points"]) {
      std::vector<std::string> r = {std::to_string(pt["batch"].get<int64_t>()),
                                    std::to_string(pt["seq"].get<int64_t>())};
      for (const json &d : devices) {
        std::string id = d["id"].get<std::string>();
        r.push_back(seconds(pt["ttft_s"][id].get<double>()));
        if (kind == "speech")
          r.push_back(seconds(
              pt["encode_per_second_of_audio"]["time_s"][id].get<double>()));
      }
      tt.rows.push_back(r);
    }
    h(kind == "speech" ? "time to first token and encoder time per second of "
                         "audio (its window's time / the window's seconds)"
                       : "time to first token (encode + first_step)");
    tt.print(os, markdown);
    os << "\n";
  }

  // Per group of the first point: its first call and first decode step.
  const json &first = p["points"][0];
  std::vector<const json *> grouped;
  for (const char *key : {"forward", "encode", "prefill"})
    if (first.contains(key))
      grouped.push_back(&first[key]);
  if (first.contains("decode") && !first["decode"].empty())
    grouped.push_back(&first["decode"][0]);
  for (const json *ph : grouped) {
    Table g;
    std::vector<std::string> gh = {"group", "layers", "params",
                                   "MACs",  "FLOPs",  "bytes"};
    for (const json &d : devices)
      gh.push_back(d["id"].get<std::string>() + " time");
    g.rows.push_back(gh);
    for (const json &gr : (*ph)["groups"]) {
      std::vector<std::string> r = {
          gr["group"].get<std::string>(),
          fmt::format("{:.0f}", gr["layers"].get<double>()),
          withCommas(gr["params"].get<double>()),
          si(gr["cost"]["macs"].get<double>(), ""),
          si(gr["cost"]["flops"].get<double>(), ""),
          si(gr["cost"]["bytes"].get<double>(), "B")};
      for (const json &d : devices)
        r.push_back(
            seconds(gr["time_s"][d["id"].get<std::string>()].get<double>()));
      g.rows.push_back(r);
    }
    h(fmt::format("per layer kind: {} (batch {}, seq {}, past {})",
                  (*ph)["phase"].get<std::string>(),
                  (*ph)["batch"].get<int64_t>(), (*ph)["seq"].get<int64_t>(),
                  (*ph)["past"].get<int64_t>()));
    g.print(os, markdown);
    os << "\n";
    if (perOp && ph->contains("ops")) {
      Table o;
      std::vector<std::string> oh = {"op",   "group", "x",
                                     "MACs", "FLOPs", "bytes"};
      for (const json &d : devices)
        oh.push_back(d["id"].get<std::string>() + " time");
      o.rows.push_back(oh);
      for (const json &op : (*ph)["ops"]) {
        std::vector<std::string> r = {
            op["op"].get<std::string>(),
            op["group"].get<std::string>(),
            fmt::format("{:.0f}", op["instances"].get<double>()),
            si(op["cost"]["macs"].get<double>(), ""),
            si(op["cost"]["flops"].get<double>(), ""),
            si(op["cost"]["bytes"].get<double>(), "B")};
        for (const json &d : devices)
          r.push_back(
              seconds(op["devices"][d["id"].get<std::string>()]["time_s"]
                          .get<double>()));
        o.rows.push_back(r);
      }
      h(fmt::format("per op: {}", (*ph)["phase"].get<std::string>()));
      o.print(os, markdown);
      os << "\n";
    }
  }
}

void renderCsv(const json &p, std::ostream &os) {
  os << "phase,batch,seq,past,tokens,macs,flops,matmul_flops,transcendentals,"
        "weight_bytes,activation_bytes,kv_read_bytes,kv_write_bytes,bytes,"
        "kv_bytes,activated_params_expected,device,time_s,compute_s,memory_s,"
        "comm_s,bound,tokens_per_s,memory_needed_bytes,fits\n";
  std::vector<const json *> points;
  for (const json &pt : p["points"])
    points.push_back(&pt);
  // A vision-language model's encoder and image prompts: phases "vision"
  // (the images of the batch) and "prefill" (text + image tokens).
  if (p.contains("vision"))
    for (const json &pt : p["vision"]["with_images"])
      points.push_back(&pt);
  for (const json *ptp : points) {
    const json &pt = *ptp;
    std::vector<const json *> phases;
    for (const char *key :
         {"vision", "forward", "encode", "first_step", "prefill"})
      if (pt.contains(key))
        phases.push_back(&pt[key]);
    if (pt.contains("decode"))
      for (const json &d : pt["decode"])
        phases.push_back(&d);
    for (const json *ph : phases) {
      const json &c = (*ph)["cost"];
      std::string base = fmt::format(
          "{},{},{},{},{},{:.17g},{:.17g},{:.17g},{:.17g},{:.17g},{:.17g},"
          "{:.17g},{:.17g},{:.17g},{:.17g},{:.17g}",
          (*ph)["phase"].get<std::string>(), (*ph)["batch"].get<int64_t>(),
          (*ph)["seq"].get<int64_t>(), (*ph)["past"].get<int64_t>(),
          (*ph)["tokens"].get<int64_t>(), c["macs"].get<double>(),
          c["flops"].get<double>(), c["matmul_flops"].get<double>(),
          c["transcendentals"].get<double>(), c["weight_bytes"].get<double>(),
          c["activation_bytes"].get<double>(), c["kv_read_bytes"].get<double>(),
          c["kv_write_bytes"].get<double>(), c["bytes"].get<double>(),
          (*ph)["kv_bytes"].get<double>(),
          (*ph)["activated_params_expected"].get<double>());
      if ((*ph)["devices"].empty())
        os << base << ",,,,,,,,,\n";
      for (auto it = (*ph)["devices"].begin(); it != (*ph)["devices"].end();
           ++it) {
        const json &d = it.value();
        os << base
           << fmt::format(
                  ",{},{:.17g},{:.17g},{:.17g},{:.17g},{},{:.17g},"
                  "{:.17g},{}\n",
                  it.key(), d["time_s"].get<double>(),
                  d["compute_s"].get<double>(), d["memory_s"].get<double>(),
                  d["comm_s"].get<double>(), d["bound"].get<std::string>(),
                  d["tokens_per_s"].get<double>(),
                  d["memory_needed_bytes"].get<double>(),
                  d["fits"].get<bool>() ? "true" : "false");
      }
    }
  }
}

} // namespace

void renderProfile(const json &profile, const std::string &format, bool perOp,
                   std::ostream &os) {
  if (format == "json")
    os << profile.dump(2) << "\n";
  else if (format == "csv")
    renderCsv(profile, os);
  else
    renderText(profile, perOp, os, format == "md");
}

} // namespace archc
