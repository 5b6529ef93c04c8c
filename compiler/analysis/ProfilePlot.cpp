//===- ProfilePlot.cpp - -emit=profile --plot=FILE.svg --------------------===//
//
// This file implements renderProfilePlot(): three panels (TTFT, TPOT,
// memory), each with labelled axes and units, a logarithmic axis where the
// values span more than a decade and a half, one colour per device, one dash
// pattern per batch size, and a legend.
//
//===----------------------------------------------------------------------===//
#include "analysis/ProfilePlot.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>

namespace archc {

namespace {
struct Point {
  double x, y;
  /// Of a device's series: whether the weights and the KV cache / state of
  /// this point fit in the device's memory (the report's `fits`); a point
  /// that does not is drawn hollow.
  std::optional<bool> fits;
};
struct Series {
  Series(std::string label, std::string color, std::string dash,
         std::string device, int64_t batch)
      : label(std::move(label)), color(std::move(color)), dash(std::move(dash)),
        device(std::move(device)), batch(batch) {}
  std::string label, color, dash, device;
  int64_t batch = 0;
  std::vector<Point> points;
};
struct Panel {
  Panel(std::string id, std::string title, std::string xLabel,
        std::string yLabel, double yScale)
      : id(std::move(id)), title(std::move(title)), xLabel(std::move(xLabel)),
        yLabel(std::move(yLabel)), yScale(yScale) {}
  std::string id, title, xLabel, yLabel;
  double yScale = 1; ///< displayed value = y * yScale
  std::vector<Series> series;
  std::vector<std::pair<std::string, double>> hlines; ///< label, y
};

const char *kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                         "#9467bd", "#8c564b", "#e377c2", "#17becf"};
const char *kDashes[] = {"", "6,3", "2,3", "8,3,2,3", "1,2"};

std::string escape(const std::string &s) {
  std::string r;
  for (char c : s) {
    if (c == '&')
      r += "&amp;";
    else if (c == '<')
      r += "&lt;";
    else if (c == '>')
      r += "&gt;";
    else if (c == '"')
      r += "&quot;";
    else
      r += c;
  }
  return r;
}

std::string num(double v) { return fmt::format("{:.6g}", v); }

/// "8.03 B", "671 B", "124 M".
std::string humanCount(double v) {
  if (v >= 1e12)
    return fmt::format("{:.3g} T", v / 1e12);
  if (v >= 1e9)
    return fmt::format("{:.3g} B", v / 1e9);
  if (v >= 1e6)
    return fmt::format("{:.3g} M", v / 1e6);
  return fmt::format("{:.0f}", v);
}

/// An axis: linear from 0 or logarithmic.
struct Axis {
  double lo = 0, hi = 1;
  bool log = false;
  void fit(std::vector<double> values, bool allowLog, bool fromZero) {
    values.erase(std::remove_if(values.begin(), values.end(),
                                [](double v) { return !(v > 0); }),
                 values.end());
    if (values.empty()) {
      lo = 0;
      hi = 1;
      return;
    }
    double mn = *std::min_element(values.begin(), values.end());
    double mx = *std::max_element(values.begin(), values.end());
    log = allowLog && mx / mn > 30;
    if (log) {
      lo = std::pow(10, std::floor(std::log10(mn)));
      hi = std::pow(10, std::ceil(std::log10(mx)));
      if (hi <= lo)
        hi = lo * 10;
    } else {
      lo = fromZero ? 0 : mn;
      hi = mx * 1.1;
      if (hi <= lo)
        hi = lo + 1;
      double step = niceStep(hi - lo);
      hi = std::ceil(hi / step) * step;
      if (!fromZero)
        lo = std::floor(lo / step) * step;
    }
  }
  static double niceStep(double span) {
    double raw = span / 5;
    double p = std::pow(10, std::floor(std::log10(raw)));
    for (double m : {1.0, 2.0, 2.5, 5.0, 10.0})
      if (raw <= m * p)
        return m * p;
    return 10 * p;
  }
  double frac(double v) const {
    if (log)
      return (std::log10(v) - std::log10(lo)) /
             (std::log10(hi) - std::log10(lo));
    return (v - lo) / (hi - lo);
  }
  std::vector<double> ticks() const {
    std::vector<double> t;
    if (log) {
      int decades = static_cast<int>(std::lround(std::log10(hi / lo)));
      for (double d = lo; d <= hi * 1.0001; d *= 10) {
        t.push_back(d);
        if (decades <= 2)
          for (double m : {2.0, 5.0})
            if (d * m < hi)
              t.push_back(d * m);
      }
      std::sort(t.begin(), t.end());
    } else {
      double step = niceStep(hi - lo);
      for (double v = lo; v <= hi + step * 1e-6; v += step)
        t.push_back(v);
    }
    return t;
  }
};

std::string tickLabel(double v) {
  if (v == 0)
    return "0";
  if (std::fabs(v) >= 1e5 || std::fabs(v) < 1e-3)
    return fmt::format("{:.0e}", v);
  return fmt::format("{:g}", v);
}

void drawPanel(std::string &svg, const Panel &p, double x0, double y0, double w,
               double h) {
  const double left = 64, right = 24, top = 28, bottom = 44;
  double px0 = x0 + left, px1 = x0 + w - right, py0 = y0 + top,
         py1 = y0 + h - bottom;
  std::vector<double> xs, ys;
  for (const Series &s : p.series)
    for (const Point &pt : s.points) {
      xs.push_back(pt.x);
      ys.push_back(pt.y * p.yScale);
    }
  for (const auto &[label, y] : p.hlines)
    ys.push_back(y * p.yScale);
  Axis ax, ay;
  ax.fit(xs, /*allowLog=*/true, /*fromZero=*/false);
  ay.fit(ys, /*allowLog=*/true, /*fromZero=*/true);
  auto X = [&](double v) { return px0 + ax.frac(v) * (px1 - px0); };
  auto Y = [&](double v) { return py1 - ay.frac(v * p.yScale) * (py1 - py0); };
  svg += fmt::format("<g class=\"panel\" data-panel=\"{}\" "
                     "data-log-x=\"{}\" data-log-y=\"{}\">\n",
                     p.id, ax.log ? 1 : 0, ay.log ? 1 : 0);
  svg += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"14\" "
                     "font-weight=\"bold\" text-anchor=\"middle\">{}</text>\n",
                     num((px0 + px1) / 2), num(y0 + 16), escape(p.title));
  // Grid, ticks and labels.
  for (double t : ax.ticks()) {
    double x = X(t);
    svg += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" "
                       "stroke=\"#ddd\"/>\n",
                       num(x), num(py0), num(py1));
    svg += fmt::format("<text class=\"xtick\" x=\"{}\" y=\"{}\" "
                       "font-size=\"11\" text-anchor=\"middle\">{}</text>\n",
                       num(x), num(py1 + 14), tickLabel(t));
  }
  for (double t : ay.ticks()) {
    double y = py1 - ay.frac(t) * (py1 - py0);
    svg += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" "
                       "stroke=\"#ddd\"/>\n",
                       num(px0), num(y), num(px1));
    svg += fmt::format("<text class=\"ytick\" x=\"{}\" y=\"{}\" "
                       "font-size=\"11\" text-anchor=\"end\">{}</text>\n",
                       num(px0 - 4), num(y + 4), tickLabel(t));
  }
  svg += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" "
                     "fill=\"none\" stroke=\"#333\"/>\n",
                     num(px0), num(py0), num(px1 - px0), num(py1 - py0));
  svg += fmt::format("<text class=\"xlabel\" x=\"{}\" y=\"{}\" "
                     "font-size=\"12\" text-anchor=\"middle\">{}</text>\n",
                     num((px0 + px1) / 2), num(py1 + 32), escape(p.xLabel));
  svg += fmt::format("<text class=\"ylabel\" x=\"{0}\" y=\"{1}\" "
                     "font-size=\"12\" text-anchor=\"middle\" "
                     "transform=\"rotate(-90 {0} {1})\">{2}</text>\n",
                     num(x0 + 16), num((py0 + py1) / 2), escape(p.yLabel));
  for (const auto &[label, y] : p.hlines) {
    double yy = Y(y);
    svg += fmt::format("<line class=\"capacity\" data-y=\"{0}\" x1=\"{1}\" "
                       "y1=\"{2}\" x2=\"{3}\" y2=\"{2}\" stroke=\"#555\" "
                       "stroke-dasharray=\"4,4\"/>\n",
                       num(y), num(px0), num(yy), num(px1));
    svg += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"10\" "
                       "text-anchor=\"end\" fill=\"#555\">{}</text>\n",
                       num(px1 - 4), num(yy - 3), escape(label));
  }
  for (const Series &s : p.series) {
    std::string path;
    for (const Point &pt : s.points)
      path += fmt::format("{}{},{}", path.empty() ? "M" : " L", num(X(pt.x)),
                          num(Y(pt.y)));
    svg += fmt::format("<path d=\"{}\" fill=\"none\" stroke=\"{}\" "
                       "stroke-width=\"2\"{}/>\n",
                       path, s.color,
                       s.dash.empty() ? ""
                                      : " stroke-dasharray=\"" + s.dash + "\"");
    for (const Point &pt : s.points) {
      bool noFit = pt.fits.has_value() && !*pt.fits;
      svg += fmt::format(
          "<circle class=\"point\" data-series=\"{}\" data-device=\"{}\" "
          "data-batch=\"{}\" data-x=\"{:.17g}\" data-y=\"{:.17g}\"{} "
          "cx=\"{}\" cy=\"{}\" r=\"{}\" {}/>\n",
          escape(s.label), escape(s.device), s.batch, pt.x, pt.y,
          pt.fits ? fmt::format(" data-fits=\"{}\"", *pt.fits ? 1 : 0) : "",
          num(X(pt.x)), num(Y(pt.y)), noFit ? 4 : 3,
          noFit ? fmt::format("fill=\"white\" stroke=\"{}\" "
                              "stroke-width=\"2\"",
                              s.color)
                : fmt::format("fill=\"{}\"", s.color));
    }
  }
  svg += "</g>\n";
}
} // namespace

std::string renderProfilePlot(const nlohmann::ordered_json &profile) {
  const auto &model = profile.at("model");
  std::vector<std::string> devices;
  std::map<std::string, double> capacity;
  for (const auto &d : profile.at("devices")) {
    devices.push_back(d.at("id").get<std::string>());
    capacity[devices.back()] = d.value("memory_gb", 0.0) * 1e9;
  }
  std::vector<int64_t> batches;
  for (const auto &pt : profile.at("points")) {
    int64_t b = pt.at("batch").get<int64_t>();
    if (std::find(batches.begin(), batches.end(), b) == batches.end())
      batches.push_back(b);
  }
  std::sort(batches.begin(), batches.end());
  auto dashOf = [&](int64_t b) {
    size_t i = std::find(batches.begin(), batches.end(), b) - batches.begin();
    return std::string(kDashes[i % 5]);
  };
  Panel ttft{"ttft", "Time to first token (prefill)", "prompt length (tokens)",
             "TTFT (ms)", 1e3};
  Panel tpot{"tpot", "Time per output token (decode)",
             "context length (tokens)", "TPOT (ms)", 1e3};
  Panel mem{"memory", "Memory: weights + KV cache / state",
            "context length (tokens)", "memory (GB)", 1e-9};
  bool anyNoFit = false;
  for (size_t di = 0; di < devices.size(); ++di) {
    const std::string &dev = devices[di];
    for (int64_t b : batches) {
      Series pre{fmt::format("{} batch {}", dev, b), kColors[di % 8], dashOf(b),
                 dev, b};
      Series dec = pre;
      for (const auto &pt : profile.at("points")) {
        if (pt.at("batch").get<int64_t>() != b)
          continue;
        // The first call of a point: a decoder's prefill, an encoder's
        // forward, an encoder-decoder's encode.
        const auto &p = pt.contains("prefill")   ? pt.at("prefill")
                        : pt.contains("forward") ? pt.at("forward")
                                                 : pt.at("encode");
        if (p.contains("devices") && p["devices"].contains(dev))
          pre.points.push_back({p.at("seq").get<double>(),
                                p["devices"][dev].at("time_s").get<double>(),
                                p["devices"][dev].value("fits", true)});
        for (const auto &d :
             pt.value("decode", nlohmann::ordered_json::array()))
          if (d.contains("devices") && d["devices"].contains(dev)) {
            const auto &dd = d["devices"][dev];
            dec.points.push_back({d.at("past").get<double>(),
                                  dd.at("time_s").get<double>(),
                                  dd.value("fits", true)});
            anyNoFit |= !dd.value("fits", true);
          }
        anyNoFit |= p.contains("devices") && p["devices"].contains(dev) &&
                    !p["devices"][dev].value("fits", true);
      }
      auto byX = [](const Point &a, const Point &c) { return a.x < c.x; };
      std::sort(pre.points.begin(), pre.points.end(), byX);
      std::sort(dec.points.begin(), dec.points.end(), byX);
      if (!pre.points.empty())
        ttft.series.push_back(pre);
      if (!dec.points.empty())
        tpot.series.push_back(dec);
    }
  }
  double weights = model.at("weight_bytes").get<double>();
  for (int64_t b : batches) {
    Series s{fmt::format("weights + KV/state, batch {}", b), "#444", dashOf(b),
             "", b};
    for (const auto &pt : profile.at("points")) {
      if (pt.at("batch").get<int64_t>() != b)
        continue;
      for (const auto &d : pt.value("decode", nlohmann::ordered_json::array()))
        s.points.push_back({d.at("past").get<double>(),
                            weights + d.at("kv_bytes").get<double>(),
                            std::nullopt});
    }
    std::sort(s.points.begin(), s.points.end(),
              [](const Point &a, const Point &c) { return a.x < c.x; });
    s.points.erase(
        std::unique(s.points.begin(), s.points.end(),
                    [](const Point &a, const Point &c) { return a.x == c.x; }),
        s.points.end());
    mem.series.push_back(s);
  }
  mem.hlines.push_back({"weights", weights});
  for (const std::string &dev : devices)
    if (capacity[dev] > 0)
      mem.hlines.push_back({dev + " memory", capacity[dev]});

  std::vector<Panel *> panels;
  if (!ttft.series.empty())
    panels.push_back(&ttft);
  if (!tpot.series.empty())
    panels.push_back(&tpot);
  panels.push_back(&mem);
  const double pw = 400, ph = 340;
  double width = pw * panels.size();
  double legendRows = devices.size() + batches.size() + (anyNoFit ? 1 : 0);
  double height = 40 + ph + 20 + 18 * legendRows + 20;
  std::string svg = fmt::format(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" "
      "height=\"{1}\" viewBox=\"0 0 {0} {1}\" font-family=\"sans-serif\">\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n",
      num(width), num(height));
  const auto &rt = profile.at("runtime");
  svg += fmt::format(
      "<text x=\"12\" y=\"24\" font-size=\"16\" font-weight=\"bold\">{} ({}): "
      "{} parameters, runtime {} (weights {} bits, KV {} bits)</text>\n",
      escape(model.value("arch", "")), escape(model.value("config", "")),
      humanCount(model.value("params", 0.0)), escape(rt.value("name", "")),
      num(rt.value("effective_weight_bits", 0.0)),
      num(rt.value("kv_bits", 0.0)));
  for (size_t i = 0; i < panels.size(); ++i)
    drawPanel(svg, *panels[i], pw * i, 36, pw, ph);
  // Legend: devices (colour), batches (dash).
  double ly = 36 + ph + 24;
  svg += "<g class=\"legend\">\n";
  for (size_t di = 0; di < devices.size(); ++di, ly += 18) {
    svg += fmt::format("<line x1=\"20\" y1=\"{0}\" x2=\"50\" y2=\"{0}\" "
                       "stroke=\"{1}\" stroke-width=\"3\"/>\n",
                       num(ly - 4), kColors[di % 8]);
    svg += fmt::format("<text x=\"58\" y=\"{}\" font-size=\"12\">{}</text>\n",
                       num(ly), escape(devices[di]));
  }
  if (devices.empty()) {
    svg += fmt::format("<text x=\"20\" y=\"{}\" font-size=\"12\">no device "
                       "requested: latency needs --device</text>\n",
                       num(ly));
    ly += 18;
  }
  for (int64_t b : batches) {
    svg += fmt::format(
        "<line x1=\"20\" y1=\"{0}\" x2=\"50\" y2=\"{0}\" "
        "stroke=\"#444\" stroke-width=\"2\"{1}/>\n",
        num(ly - 4),
        dashOf(b).empty() ? "" : " stroke-dasharray=\"" + dashOf(b) + "\"");
    svg += fmt::format("<text x=\"58\" y=\"{}\" font-size=\"12\">batch "
                       "{}</text>\n",
                       num(ly), b);
    ly += 18;
  }
  if (anyNoFit) {
    svg += fmt::format("<circle cx=\"35\" cy=\"{}\" r=\"4\" fill=\"white\" "
                       "stroke=\"#444\" stroke-width=\"2\"/>\n",
                       num(ly - 4));
    svg += fmt::format("<text x=\"58\" y=\"{}\" font-size=\"12\">hollow: "
                       "weights + KV cache / state do not fit in the "
                       "device's memory</text>\n",
                       num(ly));
    ly += 18;
  }
  svg += "</g>\n</svg>\n";
  return svg;
}

} // namespace archc
