#pragma once
// The one way ember draws a report page: the building blocks every HTML report uses
// (`--html FILE` of kv compare, kv matrix, study kv-quant and study sweep), so the pages share
// one look, one colour scale and one set of guarantees.
//
// Design goals: self-contained pages (inline CSS and SVG; no script, no network reference,
// nothing needed but a browser); every drawn number readable without a script (each heatmap
// cell and chart point carries an SVG <title> with its exact value, shown on hover); axes
// labelled with names and ticks; charts sized by their data (a heatmap's cell count sets its
// size, a chart's axis ranges come from its points), so there is no empty chart space.
// Non-goals: interaction, arbitrary chart types, a layout engine.
//
// Every string a caller passes as plain text (captions, axis labels, tick labels, titles,
// series names, point labels) is escaped here; Table cells and Heatmap/Chart `attrs` are
// HTML fragments the caller builds (escape file-derived text with html::escape). No NaN or
// infinity ever reaches an SVG coordinate: non-finite values are drawn as "n/a" cells or
// left out of a chart (and say so in their title), never as coordinates.
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace ember::html {

std::string escape(const std::string& s);  // & < > " ' -> entities
// printf-formats v ("%.4g" by default); "n/a" for NaN / infinity.
std::string num(double v, const char* fmt = "%.4g");

// What a saved page says about itself, under its title: the files and prompt sets it was made
// from, the build that made it and when. An empty Stamp draws nothing (pages built by tests).
struct Stamp {
  std::vector<std::pair<std::string, std::string>> inputs;  // (role, path), e.g. ("model", "m.gguf")
  std::string producer;  // e.g. "ember 0.1.0 (build 342, commit cdd1cb2)"
  std::string date;      // ISO-8601 UTC, e.g. "2026-12-04T22:40:00Z"
};

// "<!DOCTYPE html>...<body><h1>TITLE</h1>" with the shared style sheet and the stamp, and its
// end.
std::string page_begin(const std::string& title, const Stamp& stamp = {});
// The stamp alone, one paragraph ("" for an empty one), for a page with its own head.
std::string stamp_html(const Stamp& stamp);
std::string page_end();

// A sequential colour scale over [lo, hi] (log10 when `log`; lo, hi > 0 then): light yellow
// (near, small) to dark red (far, large), ColorBrewer's YlOrRd, perceptually ordered and
// readable in greyscale. Values outside the range are clamped to its ends.
struct ColourScale {
  double lo = 0, hi = 1;
  bool log = false;
  std::string label;  // what the value is, e.g. "1 - cosine"
  double position(double v) const;   // [0, 1]
  std::string colour(double v) const;
};
inline constexpr const char* kExactColour = "#c9e4d0";    // bit-identical: distinct from the scale
inline constexpr const char* kMissingColour = "#3b3b3b";  // not computable

// One grid of cells: rows (e.g. layers) by columns (e.g. KV heads), with tick labels on both
// axes, an axis name on both, and a colour legend below showing values at ticks (plus the
// bit-identical and n/a swatches). Cell size shrinks with the grid (26 px down to 6 px).
struct HeatCell {
  std::optional<double> value;  // none: n/a
  bool exact = false;           // drawn in kExactColour whatever the value
  std::string title;            // hover text (plain text)
  std::string attrs;            // extra attributes on the <rect> (HTML, e.g. data-layer="0")
};
struct Heatmap {
  std::string caption;                 // plain text
  std::string svg_class = "heatmap", cell_class = "cell", svg_attrs;
  std::string row_axis, col_axis;      // "layer", "KV head"
  std::vector<std::string> row_ticks, col_ticks;  // one per row / column
  std::vector<HeatCell> cells;         // row-major, rows * cols
  ColourScale scale;
  bool show_exact = true;              // legend swatch for bit-identical
};
std::string heatmap(const Heatmap& h);

// A line / scatter chart. Axis ranges default to the data's (rounded out to ticks); on a log
// axis values <= 0 cannot be drawn: the caller maps them to a floor and says so.
struct ChartPoint {
  double x = 0, y = 0;
  std::string label;   // drawn beside the point (plain text), e.g. "a=3"
  std::string title;   // hover text; default "name: x, y"
  std::string colour;  // overrides the series colour
};
struct Series {
  std::string name, colour = "#1f77b4";
  std::vector<ChartPoint> points;
  bool line = true, dashed = false;
};
struct Axis {
  std::string label;
  bool log = false;
  std::optional<double> lo, hi;  // default: from the data
  bool integer = false;          // ticks at integers only (layers, steps, anchors)
};
struct Chart {
  std::string caption, svg_class = "chart";
  Axis x, y;
  std::vector<Series> series;
  int width = 520, height = 280;  // the plot area plus margins; legend rows add height
};
std::string chart(const Chart& c);

// A table: header cells are plain text, body cells HTML fragments; numeric columns are
// right-aligned in tabular figures.
struct Table {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  std::vector<bool> numeric;  // per column; missing = false
  std::string css_class;
};
std::string table(const Table& t);

// Ticks for an axis over [lo, hi]: (value, label). Linear: 1/2/5 x 10^k steps, at most about
// `max_ticks`; log: powers of ten (every k-th decade when there are many).
// A power of ten as an axis labels it: 0.001 .. 1000 written out, else 1e-9, 1e6.
std::string decade_label(int exponent);
std::vector<std::pair<double, std::string>> axis_ticks(double lo, double hi, bool log, bool integer,
                                                       int max_ticks = 6);

}  // namespace ember::html
