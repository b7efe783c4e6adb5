#include "util/html_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace ember::html {

namespace {

// ColorBrewer YlOrRd, 9 classes: light (near) to dark (far).
constexpr unsigned kStops[] = {0xffffcc, 0xffeda0, 0xfed976, 0xfeb24c, 0xfd8d3c,
                               0xfc4e2a, 0xe31a1c, 0xbd0026, 0x800026};
constexpr int kNStops = int(sizeof kStops / sizeof kStops[0]);

std::string px(double v) {  // an SVG coordinate: finite by construction, one decimal
  char b[32];
  std::snprintf(b, sizeof b, "%.1f", std::isfinite(v) ? v : 0.0);
  return b;
}
std::string ipx(int v) { return std::to_string(v); }

double text_width(const std::string& s, double per_char = 6.6) { return per_char * double(s.size()); }

std::string text(double x, double y, const std::string& s, const char* anchor = "start",
                 const std::string& extra = "") {
  return "<text x=\"" + px(x) + "\" y=\"" + px(y) + "\" text-anchor=\"" + anchor + "\"" +
         (extra.empty() ? "" : " " + extra) + ">" + escape(s) + "</text>\n";
}

std::string svg_open(const std::string& cls, const std::string& attrs, int w, int h,
                     const std::string& label) {
  return "<svg class=\"" + escape(cls) + "\"" + (attrs.empty() ? "" : " " + attrs) +
         " xmlns=\"http://www.w3.org/2000/svg\" width=\"" + ipx(w) + "\" height=\"" + ipx(h) +
         "\" viewBox=\"0 0 " + ipx(w) + " " + ipx(h) + "\" role=\"img\" aria-label=\"" +
         escape(label) + "\">\n";
}

// Log-axis helpers: a value's decade exponent, and the decade label.
}  // namespace

std::string decade_label(int d) {
  if (d >= -3 && d <= 3) return num(std::pow(10.0, d), "%g");
  return "1e" + std::to_string(d);
}

namespace {

std::string linear_label(double v, double step) {
  if (std::fabs(v) < step * 1e-9) v = 0;  // no "-0" or 1e-17 from accumulated steps
  const double a = std::fabs(v);
  if (a != 0 && (a >= 1e5 || a < 1e-3)) return num(v, "%.1e");
  // As many decimals as the step has, not as its magnitude: a step of 0.25 needs two, or 0.25
  // and 0.75 print as "0.2" and "0.8" while the ticks stay evenly spaced.
  int decimals = 0;
  for (double scaled = step; decimals < 6 && std::fabs(scaled - std::round(scaled)) > 1e-6 * scaled; scaled *= 10)
    ++decimals;
  char f[16];
  std::snprintf(f, sizeof f, "%%.%df", decimals);
  return num(v, f);
}

double nice_step(double raw, bool integer) {
  if (!(raw > 0) || !std::isfinite(raw)) return 1;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = 10 * mag;
  for (double m : {1.0, 2.0, 2.5, 5.0})
    if (m * mag >= raw * (1 - 1e-12)) { step = m * mag; break; }
  if (integer) step = std::max(1.0, std::round(step));
  return step;
}

// The drawn range of an axis: given bounds, else the data's rounded out to ticks.
std::pair<double, double> axis_range(const Axis& a, std::vector<double> v) {
  v.erase(std::remove_if(v.begin(), v.end(), [&](double x) { return !std::isfinite(x) || (a.log && x <= 0); }),
          v.end());
  double lo = v.empty() ? (a.log ? 1e-3 : 0.0) : *std::min_element(v.begin(), v.end());
  double hi = v.empty() ? 1.0 : *std::max_element(v.begin(), v.end());
  if (a.lo) lo = *a.lo;
  if (a.hi) hi = *a.hi;
  if (a.log) {
    lo = std::pow(10.0, std::floor(std::log10(lo) + 1e-9));
    hi = std::pow(10.0, std::ceil(std::log10(hi) - 1e-9));
    if (hi <= lo) hi = lo * 10;
    return {lo, hi};
  }
  if (hi <= lo) {  // one value: a unit (or 10 %) window around it
    const double pad = lo == 0 ? 1.0 : std::fabs(lo) * 0.1;
    if (!a.lo) lo -= pad;
    if (!a.hi || hi <= lo) hi = lo + 2 * pad;
  }
  const double step = nice_step((hi - lo) / 5, a.integer);
  if (!a.lo) lo = std::floor(lo / step + 1e-9) * step;
  if (!a.hi) hi = std::ceil(hi / step - 1e-9) * step;
  return {lo, hi};
}

}  // namespace

std::string escape(const std::string& s) {
  std::string o;
  o.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      case '\'': o += "&#39;"; break;
      default: o += c;
    }
  }
  return o;
}

std::string num(double v, const char* fmt) {
  if (!std::isfinite(v)) return "n/a";
  char b[64];
  std::snprintf(b, sizeof b, fmt, v);
  return b;
}

// "<p class="stamp">role <code>path</code> · ... · made by PRODUCER on DATE</p>", or "".
std::string stamp_html(const Stamp& s) {
  std::vector<std::string> parts;
  for (const auto& [role, path] : s.inputs) parts.push_back(escape(role) + " <code>" + escape(path) + "</code>");
  if (!s.producer.empty() || !s.date.empty())
    parts.push_back("made by " + escape(s.producer.empty() ? "ember" : s.producer) +
                    (s.date.empty() ? "" : " on " + escape(s.date)));
  if (parts.empty()) return "";
  std::string o = "<p class=\"stamp muted\">";
  for (size_t i = 0; i < parts.size(); ++i) o += (i ? " &middot; " : "") + parts[i];
  return o + "</p>\n";
}

std::string page_begin(const std::string& title, const Stamp& stamp) {
  return "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
         "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>" +
         escape(title) +
         "</title>\n<style>\n"
         "body{font:14px/1.5 system-ui,-apple-system,\"Segoe UI\",Roboto,\"Helvetica Neue\",Arial,"
         "sans-serif;color:#1d2330;background:#fff;margin:28px auto;max-width:1180px;padding:0 24px}\n"
         "h1{font-size:24px;margin:0 0 10px}h2{font-size:18px;margin:28px 0 8px;padding-bottom:4px;"
         "border-bottom:1px solid #e3e6ea}p{max-width:900px;margin:6px 0}\n"
         "code{font:12px ui-monospace,\"DejaVu Sans Mono\",Menlo,monospace;background:#f3f4f6;"
         "padding:1px 4px;border-radius:3px;overflow-wrap:anywhere}\n"
         "table{border-collapse:collapse;font-size:13px;margin:8px 0}th,td{padding:4px 8px;"
         "border-bottom:1px solid #e3e6ea;text-align:left;vertical-align:top}th{background:#f6f7f9;"
         "font-weight:600;border-bottom:2px solid #cfd4da}td.num,th.num{text-align:right;"
         "font-variant-numeric:tabular-nums}td.num{white-space:nowrap}tbody tr:nth-child(even){background:#fafbfc}\n"
         ".figures{display:flex;flex-wrap:wrap;gap:4px 32px;align-items:flex-start}"
         "figure{margin:8px 0 12px}figcaption{font-size:13px;font-weight:600;margin-bottom:4px;"
         "max-width:560px}\n"
         "svg{display:block;overflow:visible}svg text{font-family:inherit;font-size:11px;fill:#3a4150}"
         "svg text.axis-name{font-size:12px;font-weight:600;fill:#1d2330}svg text.point-label"
         "{font-size:11px;font-weight:600}\n"
         ".note{background:#fff7e0;border-left:4px solid #e6a100;padding:8px 12px;max-width:900px}"
         ".muted{color:#5b6472}.pass{color:#1e7b45;font-weight:600}.fail{color:#b42318;font-weight:600}\n"
         "</style>\n</head>\n<body>\n<h1>" +
         escape(title) + "</h1>\n" + stamp_html(stamp);
}

std::string page_end() { return "</body>\n</html>\n"; }

double ColourScale::position(double v) const {
  if (!std::isfinite(v)) return 0;
  double t;
  if (log) {
    if (v <= 0) return 0;
    t = (std::log10(v) - std::log10(lo)) / (std::log10(hi) - std::log10(lo));
  } else {
    t = hi > lo ? (v - lo) / (hi - lo) : 0;
  }
  return std::isfinite(t) ? std::clamp(t, 0.0, 1.0) : 0.0;
}

std::string ColourScale::colour(double v) const {
  const double t = position(v) * (kNStops - 1);
  const int i = std::min(int(t), kNStops - 2);
  const double f = t - i;
  auto ch = [&](int shift) {
    const double a = double((kStops[i] >> shift) & 255), b = double((kStops[i + 1] >> shift) & 255);
    return int(std::lround(a + (b - a) * f));
  };
  char b[16];
  std::snprintf(b, sizeof b, "#%02x%02x%02x", ch(16), ch(8), ch(0));
  return b;
}

std::vector<std::pair<double, std::string>> axis_ticks(double lo, double hi, bool log, bool integer,
                                                       int max_ticks) {
  std::vector<std::pair<double, std::string>> t;
  if (!std::isfinite(lo) || !std::isfinite(hi) || hi < lo) return t;
  max_ticks = std::max(max_ticks, 2);
  if (log) {
    if (lo <= 0) return t;
    const int d0 = int(std::ceil(std::log10(lo) - 1e-9)), d1 = int(std::floor(std::log10(hi) + 1e-9));
    // Every k-th decade, k the smallest that fits, preferring a k that also hits both ends;
    // counted down from the top decade so the largest value is always labelled.
    const int span = d1 - d0, k0 = std::max(1, (span + max_ticks - 2) / (max_ticks - 1));
    int k = k0;
    while (span > 0 && span % k != 0 && k < 2 * k0) ++k;
    if (span > 0 && span % k != 0) k = k0;
    for (int d = d1; d >= d0; d -= k) t.insert(t.begin(), {std::pow(10.0, d), decade_label(d)});
    return t;
  }
  const double step = nice_step((hi - lo) / (max_ticks - 1), integer);
  const double first = std::ceil(lo / step - 1e-9) * step;
  for (int i = 0; i < 1000; ++i) {
    const double v = first + i * step;
    if (v > hi + step * 1e-9) break;
    t.push_back({v, linear_label(v, step)});
  }
  return t;
}

std::string heatmap(const Heatmap& h) {
  const int rows = int(h.row_ticks.size()), cols = int(h.col_ticks.size());
  size_t row_chars = 0, col_chars = 0;
  for (const auto& s : h.row_ticks) row_chars = std::max(row_chars, s.size());
  for (const auto& s : h.col_ticks) col_chars = std::max(col_chars, s.size());
  // Cells: as large as reads well, smaller as the grid grows, so the figure follows the data.
  const int cell = std::clamp(std::min(cols ? 520 / cols : 26, rows ? 560 / rows : 26), 6, 26);
  const int gap = cell >= 12 ? 2 : 1;
  const int row_stride = std::max(1, int(std::ceil(13.0 / cell)));
  const int col_stride = std::max(1, int(std::ceil((6.6 * double(col_chars) + 6) / cell)));
  const int left = 24 + int(std::ceil(6.6 * double(row_chars))) + 8, top = 40;
  const int gw = cols * cell, gh = rows * cell;
  // The legend sits under the grid, about as wide as it (160 to 260 px), the special swatches
  // on a line of their own, so a narrow grid makes a narrow figure.
  const int legend_w = std::clamp(gw, 160, 260), legend_y = top + gh + 16;
  const int width = std::max({left + gw + 12, left + legend_w + 14, left + int(text_width(h.scale.label)) + 90,
                              left + int(text_width(h.col_axis)) + 8});
  const int height = legend_y + 58;
  std::string o = "<figure>\n<figcaption>" + escape(h.caption) + "</figcaption>\n" +
                  svg_open(h.svg_class, h.svg_attrs, width, height, h.caption);
  // Axis names: columns above their ticks, rows rotated left of theirs.
  o += text(left + gw / 2.0, 13, h.col_axis, "middle", "class=\"axis-name\"");
  const double ry = top + gh / 2.0;
  o += "<text class=\"axis-name\" x=\"13\" y=\"" + px(ry) + "\" text-anchor=\"middle\" transform=\"rotate(-90 13 " +
       px(ry) + ")\">" + escape(h.row_axis) + "</text>\n";
  for (int c = 0; c < cols; c += col_stride)
    o += text(left + c * cell + (cell - gap) / 2.0, top - 8, h.col_ticks[size_t(c)], "middle");
  for (int r = 0; r < rows; r += row_stride)
    o += text(left - 6, top + r * cell + (cell - gap) / 2.0 + 4, h.row_ticks[size_t(r)], "end");
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < cols; ++c) {
      const size_t i = size_t(r) * size_t(cols) + size_t(c);
      const HeatCell empty;
      const HeatCell& hc = i < h.cells.size() ? h.cells[i] : empty;
      const bool finite = hc.value && std::isfinite(*hc.value);
      const std::string fill = hc.exact ? kExactColour : finite ? h.scale.colour(*hc.value) : kMissingColour;
      o += "<rect class=\"" + escape(h.cell_class) + "\"" + (hc.attrs.empty() ? "" : " " + hc.attrs) + " x=\"" +
           ipx(left + c * cell) + "\" y=\"" + ipx(top + r * cell) + "\" width=\"" + ipx(cell - gap) +
           "\" height=\"" + ipx(cell - gap) + "\" fill=\"" + fill + "\"><title>" + escape(hc.title) +
           "</title></rect>\n";
    }
  }
  // The legend: the scale as 50 steps with its value ticks, then the special swatches.
  o += "<g class=\"legend\">\n" + text(left, legend_y - 3, h.scale.label + (h.scale.log ? " (log scale)" : ""));
  const int bar_y = legend_y + 2, steps = 50;
  for (int i = 0; i < steps; ++i) {
    const double t = (i + 0.5) / steps;
    const double v = h.scale.log ? std::pow(10.0, std::log10(h.scale.lo) + t * (std::log10(h.scale.hi) - std::log10(h.scale.lo)))
                                 : h.scale.lo + t * (h.scale.hi - h.scale.lo);
    o += "<rect x=\"" + px(left + i * double(legend_w) / steps) + "\" y=\"" + ipx(bar_y) + "\" width=\"" +
         px(double(legend_w) / steps + 0.3) + "\" height=\"10\" fill=\"" + h.scale.colour(v) + "\"/>\n";
  }
  for (const auto& [v, label] : axis_ticks(h.scale.lo, h.scale.hi, h.scale.log, false, 6)) {
    const double x = left + h.scale.position(v) * legend_w;
    o += "<line x1=\"" + px(x) + "\" y1=\"" + ipx(bar_y + 10) + "\" x2=\"" + px(x) + "\" y2=\"" + ipx(bar_y + 14) +
         "\" stroke=\"#3a4150\"/>\n" + text(x, bar_y + 25, label, "middle");
  }
  int sx = left;
  auto swatch = [&](const char* colour, const std::string& name) {
    o += "<rect x=\"" + ipx(sx) + "\" y=\"" + ipx(bar_y + 32) + "\" width=\"10\" height=\"10\" fill=\"" + colour +
         "\" stroke=\"#9aa1ab\" stroke-width=\"0.5\"/>\n" + text(sx + 14, bar_y + 41, name);
    sx += 14 + int(text_width(name)) + 14;
  };
  if (h.show_exact) swatch(kExactColour, "bit-identical");
  swatch(kMissingColour, "n/a");
  o += "</g>\n</svg>\n</figure>\n";
  return o;
}

std::string chart(const Chart& c) {
  const double ml = 66, mr = 28, mt = 12, mb = 42;
  std::vector<double> xs, ys;
  for (const Series& s : c.series)
    for (const ChartPoint& p : s.points) {
      xs.push_back(p.x);
      ys.push_back(p.y);
    }
  // Plain names, not structured bindings: the lambdas below capture them, which C++20
  // allows but clang 14 (Debian 12's, the fuzz build's compiler) refuses.
  const std::pair<double, double> xr = axis_range(c.x, xs), yr = axis_range(c.y, ys);
  const double x0 = xr.first, x1 = xr.second, y0 = yr.first, y1 = yr.second;
  const double pw = c.width - ml - mr, ph = c.height - mt - mb;
  auto pos = [](double v, double lo, double hi, bool log) {
    const double t = log ? (std::log10(v) - std::log10(lo)) / (std::log10(hi) - std::log10(lo)) : (v - lo) / (hi - lo);
    return std::clamp(t, 0.0, 1.0);
  };
  auto X = [&](double v) { return ml + pos(v, x0, x1, c.x.log) * pw; };
  auto Y = [&](double v) { return mt + ph - pos(v, y0, y1, c.y.log) * ph; };
  auto drawable = [&](const ChartPoint& p) {
    return std::isfinite(p.x) && std::isfinite(p.y) && (!c.x.log || p.x > 0) && (!c.y.log || p.y > 0);
  };
  const int legend_rows = int(c.series.size());
  const int height = c.height + 6 + 17 * legend_rows;
  std::string o = "<figure>\n<figcaption>" + escape(c.caption) + "</figcaption>\n" +
                  svg_open(c.svg_class, "", c.width, height, c.caption);
  // Grid and ticks.
  for (const auto& [v, label] : axis_ticks(y0, y1, c.y.log, c.y.integer, 6)) {
    const double y = Y(v);
    o += "<line class=\"grid\" x1=\"" + px(ml) + "\" y1=\"" + px(y) + "\" x2=\"" + px(ml + pw) + "\" y2=\"" + px(y) +
         "\" stroke=\"#e6e8eb\"/>\n" + text(ml - 6, y + 4, label, "end");
  }
  for (const auto& [v, label] : axis_ticks(x0, x1, c.x.log, c.x.integer, std::max(2, int(pw / 60)))) {
    const double x = X(v);
    o += "<line class=\"grid\" x1=\"" + px(x) + "\" y1=\"" + px(mt) + "\" x2=\"" + px(x) + "\" y2=\"" + px(mt + ph) +
         "\" stroke=\"#eef0f2\"/>\n" + text(x, mt + ph + 15, label, "middle");
  }
  o += "<path class=\"axes\" d=\"M" + px(ml) + " " + px(mt) + "V" + px(mt + ph) + "H" + px(ml + pw) +
       "\" fill=\"none\" stroke=\"#59606b\"/>\n";
  o += text(ml + pw / 2, mt + ph + 33, c.x.label + (c.x.log ? " (log)" : ""), "middle", "class=\"axis-name\"");
  const double ymid = mt + ph / 2;
  o += "<text class=\"axis-name\" x=\"14\" y=\"" + px(ymid) + "\" text-anchor=\"middle\" transform=\"rotate(-90 14 " +
       px(ymid) + ")\">" + escape(c.y.label + (c.y.log ? " (log)" : "")) + "</text>\n";
  // Point labels: the first of twelve places around the point (right above, right below, left
  // above, left below, then further up or down, twice) that overlaps no label already placed and
  // stays inside the plot. When none is free the label is not drawn (overprinted labels read
  // as neither) and goes into the point's hover title instead; "" then.
  struct Box {
    double x0, y0, x1, y1;
  };
  std::vector<Box> placed;
  auto place_label = [&](double x, double y, const std::string& label, const std::string& colour) {
    const double w = text_width(label, 6.4), th = 12;
    const double cand[12][2] = {{7, -6},  {7, 14},  {-7, -6},  {-7, 14},  {7, -20},  {7, 28},
                                {-7, -20}, {-7, 28}, {7, -34}, {7, 42}, {-7, -34}, {-7, 42}};
    int pick = -1;
    for (int i = 0; i < 12 && pick < 0; ++i) {
      const bool left = cand[i][0] < 0;
      const Box b{left ? x + cand[i][0] - w : x + cand[i][0], y + cand[i][1] - th + 2,
                  left ? x + cand[i][0] : x + cand[i][0] + w, y + cand[i][1] + 2};
      if (b.x0 < ml || b.x1 > c.width - 2 || b.y0 < 0 || b.y1 > mt + ph) continue;
      bool clash = false;
      for (const Box& q : placed) clash = clash || (b.x0 < q.x1 && q.x0 < b.x1 && b.y0 < q.y1 && q.y0 < b.y1);
      if (!clash) {
        pick = i;
        placed.push_back(b);
      }
    }
    if (pick < 0) return std::string();
    return text(x + cand[pick][0], y + cand[pick][1], label, cand[pick][0] < 0 ? "end" : "start",
                "class=\"point-label\" fill=\"" + colour + "\"");
  };
  // Series: the line under its points; each point with its hover title and optional label.
  // Where a point falls on one an earlier series drew (within a pixel), it is drawn as a ring
  // around it, one ring wider per series beneath, and a line through such points is dashed: a
  // series equal to another shows as both colours instead of hiding the first.
  std::vector<std::pair<double, double>> earlier;  // the points of the series drawn before
  int li = 0;
  for (const Series& s : c.series) {
    struct Drawn {
      const ChartPoint* p;
      double x, y;
      long under;  // points of earlier series at the same place
    };
    std::vector<Drawn> drawn;
    bool coincides = false;
    for (const ChartPoint& p : s.points) {
      if (!drawable(p)) continue;
      const double x = X(p.x), y = Y(p.y);
      const long under = std::count_if(earlier.begin(), earlier.end(), [&](const std::pair<double, double>& q) {
        return std::fabs(q.first - x) < 1 && std::fabs(q.second - y) < 1;
      });
      drawn.push_back({&p, x, y, under});
      coincides = coincides || under > 0;
    }
    std::string pts;
    for (const Drawn& d : drawn) pts += px(d.x) + "," + px(d.y) + " ";
    if (s.line && !pts.empty())
      o += "<polyline fill=\"none\" stroke=\"" + s.colour + "\" stroke-width=\"2\"" +
           (s.dashed || coincides ? " stroke-dasharray=\"6 4\"" : "") + " points=\"" + pts + "\"/>\n";
    for (const Drawn& d : drawn) {
      const ChartPoint& p = *d.p;
      const std::string colour = p.colour.empty() ? s.colour : p.colour;
      std::string title = p.title.empty() ? s.name + ": " + num(p.x) + ", " + num(p.y) : p.title;
      const std::string label = p.label.empty() ? "" : place_label(d.x, d.y, p.label, colour);
      if (!p.label.empty() && label.empty()) title = p.label + " (" + title + ")";
      const std::string shape = d.under > 0 ? "\" r=\"" + px(4 + 2.5 * double(d.under)) + "\" fill=\"none\" stroke=\"" +
                                                  colour + "\" stroke-width=\"2\""
                                            : "\" r=\"4\" fill=\"" + colour + "\" stroke=\"#fff\" stroke-width=\"1\"";
      o += "<circle class=\"point\" cx=\"" + px(d.x) + "\" cy=\"" + px(d.y) + shape + "><title>" + escape(title) +
           "</title></circle>\n" + label;
    }
    for (const Drawn& d : drawn) earlier.push_back({d.x, d.y});
    const double ly = c.height + 4 + 17.0 * li;
    o += "<line x1=\"" + px(ml) + "\" y1=\"" + px(ly) + "\" x2=\"" + px(ml + 22) + "\" y2=\"" + px(ly) +
         "\" stroke=\"" + s.colour + "\" stroke-width=\"2\"" + (s.dashed ? " stroke-dasharray=\"6 4\"" : "") +
         (s.line ? "" : " stroke-opacity=\"0\"") + "/><circle cx=\"" + px(ml + 11) + "\" cy=\"" + px(ly) +
         "\" r=\"4\" fill=\"" + s.colour + "\"/>\n" + text(ml + 30, ly + 4, s.name);
    ++li;
  }
  o += "</svg>\n</figure>\n";
  return o;
}

std::string table(const Table& t) {
  auto is_num = [&](size_t i) { return i < t.numeric.size() && t.numeric[i]; };
  std::string o = "<table" + (t.css_class.empty() ? std::string() : " class=\"" + escape(t.css_class) + "\"") +
                  ">\n<thead><tr>";
  for (size_t i = 0; i < t.header.size(); ++i)
    o += std::string(is_num(i) ? "<th class=\"num\">" : "<th>") + escape(t.header[i]) + "</th>";
  o += "</tr></thead>\n<tbody>\n";
  for (const auto& row : t.rows) {
    o += "<tr>";
    for (size_t i = 0; i < row.size(); ++i) o += std::string(is_num(i) ? "<td class=\"num\">" : "<td>") + row[i] + "</td>";
    o += "</tr>\n";
  }
  return o + "</tbody>\n</table>\n";
}

}  // namespace ember::html
