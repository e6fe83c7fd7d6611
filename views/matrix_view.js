// Matrix views: each panel a matrix painted on a canvas from its PNG, hover reading the panel's float32 values,
// a click on a pickable panel sent back to Python. The data comes from pictures/boards.py.

const FONT_FAMILY = '"Source Sans", "Source Sans Pro", sans-serif';
const FONT = `14px ${FONT_FAMILY}`;
const CELL_FONT_BIG = `14px ${FONT_FAMILY}`;
const CELL_FONT_SMALL = `11px ${FONT_FAMILY}`;
const TEXT = "#31333f";
const MARK = "#d62728";  // red: a framed cell, the typed positions, the picked map of a sheet
const LEGEND_BAR = { width: 14, gap: 18, most: 200, labelGap: 16 };
// The least px between two labelled cells: a row's 14 px label has 12 px of glyphs; labels slanted at 45° stand
// apart by 0.71 of their cells' distance, which must hold a 14 px line.
const LABEL_PITCH = { row: 12, slanted: 21 };
const MEASURE = document.createElement("canvas").getContext("2d");  // measures text before a panel's canvas exists

// A label longer than `most` (the panel's label_chars) is cut short on the axes (hover gives it whole): one long
// word must not squeeze the matrix into a corner of its panel.
function axisLabel(text, most) {
  const chars = [...String(text)];  // by code point: never split an emoji or accented letter in two
  if (chars.length <= most) return String(text);
  // A repeated token's position ("the·26", pictures/attention_panels.token_labels) is what tells it from the
  // token's other places: cut the word, keep the position, while a letter of the word is left.
  const position = String(text).match(/·\d+$/);
  const room = most - 1 - (position ? position[0].length : 0);
  if (position && room >= 1) return chars.slice(0, room).join("") + "…" + position[0];
  return chars.slice(0, most - 1).join("") + "…";
}

// `digits` decimals, with no sign on a value that rounds to zero: a difference of -0.0004 reads 0.00, not -0.00.
function fixed(value, digits) {
  const text = value.toFixed(digits);
  return Number(text) === 0 ? (0).toFixed(digits) : text;
}

// A hover number: `digits` decimals, or four significant digits when digits is null (values spanning decades).
function numberText(value, digits) {
  return digits === null ? String(Number(value.toPrecision(4))) : fixed(value, digits);
}

function element(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined && text !== null) node.textContent = text;
  return node;
}

function widest(g, texts) {
  return texts.reduce((most, text) => Math.max(most, g.measureText(text).width), 0);
}

// Where everything goes on a panel's canvas, in CSS pixels.
function layout(g, p) {
  const plotW = p.cols * p.cell_px;
  const plotH = p.rows * p.cell_h;
  g.font = FONT;
  const yTicks = spaced(p.y_ticks, p.cell_h, LABEL_PITCH.row);
  const yLabels = yTicks.map((i) => axisLabel(p.y_labels[i], p.label_chars));
  let xTicks = p.x_ticks;
  let xLabels = xTicks.map((i) => axisLabel(p.x_labels[i], p.label_chars));
  const xWidest = widest(g, xLabels);
  const rotate = xWidest > (p.cell_px * p.cols) / Math.max(1, xLabels.length) - 4;
  if (rotate) {
    xTicks = spaced(xTicks, p.cell_px, LABEL_PITCH.slanted);
    xLabels = xTicks.map((i) => axisLabel(p.x_labels[i], p.label_chars));
  }
  const left = 20 + 8 + widest(g, yLabels) + 6;
  g.font = `600 ${FONT}`;
  const yTitleWidth = g.measureText(p.y_title).width;  // written down the left side, centred on the matrix
  g.font = FONT;
  const top = Math.max(8, (yTitleWidth + 8 - plotH) / 2);  // a matrix shorter than its title moves down to fit it
  const xLabelsHeight = rotate ? xWidest * Math.SQRT1_2 + 14 : 18;
  const bottom = 6 + xLabelsHeight + 24;
  let right = 0;
  if (p.legend) {
    const ends = [p.legend.low, p.legend.high].map((v) => legendText(v, endDigits(p.legend)));
    const marks = [p.legend.ticks, ...(p.legend.fewer_ticks || [])].flat();
    const legendTexts = [p.legend.title, ...ends, ...marks.map((v) => legendText(v))];
    right = LEGEND_BAR.gap + Math.max(LEGEND_BAR.width + 6 + widest(g, legendTexts.slice(1)), widest(g, legendTexts));
  }
  return {
    left, top, plotW, plotH, rotate, xLabelsHeight, xTicks, yTicks, xLabels, yLabels,
    width: Math.ceil(left + plotW + right + 4), height: Math.ceil(top + plotH + bottom),
  };
}

// Every n-th of the cells `ticks` names, n the least that puts labels `pitch` px apart: at 14 px cells, a
// 42-piece map's slanted labels had run into one another, and rows under 14 px wrote labels over each other.
function spaced(ticks, cellPx, pitch) {
  const gap = ticks.length > 1 ? (ticks[1] - ticks[0]) * cellPx : pitch;
  const every = Math.max(1, Math.ceil(pitch / gap));
  return ticks.filter((_, n) => n % every === 0);
}

// Digits for a legend's ends: three, or six when three would write both ends alike (a nearly constant matrix).
function endDigits(legend) {
  return legendText(legend.high) === legendText(legend.low) ? 6 : 3;
}

// A legend end as short as it can be and still say the value: 1, 0.07, 0.0012, 4.16 (three significant digits,
// or `digits`).
function legendText(value, digits = 3) {
  return Number.isFinite(value) ? String(Number(value.toPrecision(digits))) : String(value);
}

function drawAxes(g, p, box) {
  const { left, top, plotW, plotH } = box;
  g.fillStyle = TEXT;
  g.font = FONT;
  g.textBaseline = "middle";
  g.textAlign = "right";
  box.yTicks.forEach((i, n) => g.fillText(box.yLabels[n], left - 6, top + (i + 0.5) * p.cell_h));
  box.xTicks.forEach((i, n) => {
    const x = left + (i + 0.5) * p.cell_px;
    const y = top + plotH + 6;
    if (box.rotate) {
      g.save();
      g.translate(x, y);
      g.rotate(-Math.PI / 4);
      g.textAlign = "right";
      g.fillText(box.xLabels[n], 0, 0);
      g.restore();
    } else {
      g.textAlign = "center";
      g.textBaseline = "top";
      g.fillText(box.xLabels[n], x, y);
      g.textBaseline = "middle";
    }
  });
  g.font = `600 ${FONT}`;
  g.textAlign = "center";
  g.textBaseline = "bottom";
  g.fillText(p.x_title, left + plotW / 2, box.height - 2);
  g.save();
  g.translate(14, top + plotH / 2);
  g.rotate(-Math.PI / 2);
  g.textBaseline = "middle";
  g.fillText(p.y_title, 0, 0);
  g.restore();
}

function drawLegend(g, p, box) {
  const x = box.left + box.plotW + LEGEND_BAR.gap;
  const barTop = box.top + 22;
  const barHeight = Math.max(40, Math.min(LEGEND_BAR.most, box.plotH - 22));
  g.font = `600 ${FONT}`;
  g.fillStyle = TEXT;
  g.textAlign = "left";
  g.textBaseline = "top";
  g.fillText(p.legend.title, x, box.top);
  const ramp = g.createLinearGradient(0, barTop + barHeight, 0, barTop);  // low at the bottom, high on top
  p.legend.colours.forEach((colour, i) => ramp.addColorStop(i / (p.legend.colours.length - 1), colour));
  g.fillStyle = ramp;
  g.fillRect(x, barTop, LEGEND_BAR.width, barHeight);
  g.font = FONT;
  g.fillStyle = TEXT;
  g.textBaseline = "middle";
  g.fillText(legendText(p.legend.high, endDigits(p.legend)), x + LEGEND_BAR.width + 6, barTop + 6);
  g.fillText(legendText(p.legend.low, endDigits(p.legend)), x + LEGEND_BAR.width + 6, barTop + barHeight - 6);
  // Round values between the ends, centred on their height (no mark: beside a number a mark reads as a minus
  // sign); none so near an end that the labels would touch.
  const written = [];
  for (const [tick, y] of legendMarks(p.legend, barTop, barHeight)) {
    g.fillText(legendText(tick), x + LEGEND_BAR.width + 6, y);
    written.push(legendText(tick));
  }
  g.canvas.dataset.legendTicks = written.join(",");  // what a test reads of a canvas it cannot read text from
}

// [value, y] of the round values a legend writes, top down: those of its set `ticks` whose labels keep clear of each
// other and of the ends. Values written a step apart set a pace the reader expects at the ends too, so when an end is
// two such steps or more from the nearest value written (a short bar writing "1, 0.6, 0.4, 0" of 0.2, 0.4, 0.6, 0.8),
// the first of the sparser `fewer_ticks` that keeps the pace ("1, 0.5, 0").
function legendMarks(legend, barTop, barHeight) {
  const span = legend.high - legend.low;
  const clear = (ticks) => {
    const kept = [];
    let last = -Infinity;  // the y of the last value kept: they go down the bar, low values last
    for (const tick of [...ticks].reverse()) {
      const y = barTop + (barHeight * (legend.high - tick)) / span;
      const crowded = y - last < LEGEND_BAR.labelGap || y - (barTop + 6) < LEGEND_BAR.labelGap;
      if (crowded || barTop + barHeight - 6 - y < LEGEND_BAR.labelGap) continue;
      last = y;
      kept.push([tick, y]);
    }
    return kept;
  };
  const paced = (kept) => {
    if (kept.length < 2) return true;  // one value sets no pace
    const values = kept.map(([tick]) => tick);  // high to low
    const pace = Math.min(...values.slice(1).map((v, i) => values[i] - v));
    const ends = [legend.high - values[0], values[values.length - 1] - legend.low];
    return ends.every((gap) => gap < 2 * pace - 1e-9 * span);  // 1 - 0.6 is 0.4 in floats: two steps of 0.2
  };
  for (const ticks of [legend.ticks, ...(legend.fewer_ticks || [])]) {
    const kept = clear(ticks);
    if (paced(kept)) return kept;
  }
  return clear(legend.ticks);
}

// The matrix itself: the PNG scaled up without smoothing, lines between cells, values written in small maps.
function drawCells(g, p, box, image, values, masked) {
  const { left, top, plotW, plotH } = box;
  g.imageSmoothingEnabled = false;
  g.drawImage(image, left, top, plotW, plotH);
  if (p.grid_lines) {
    g.strokeStyle = "#ffffff";
    g.lineWidth = 1;
    g.beginPath();
    for (let c = 1; c < p.cols; c++) g.moveTo(left + c * p.cell_px, top), g.lineTo(left + c * p.cell_px, top + plotH);
    for (let r = 1; r < p.rows; r++) g.moveTo(left, top + r * p.cell_h), g.lineTo(left + plotW, top + r * p.cell_h);
    g.stroke();
  }
  if (p.frame) {  // a red frame round the block of rows x cols cells from (row, col): one cell, or typed positions
    const [row, col, rows, cols] = p.frame;
    g.strokeStyle = MARK;
    g.lineWidth = 3;
    g.strokeRect(left + col * p.cell_px + 1.5, top + row * p.cell_h + 1.5, cols * p.cell_px - 3, rows * p.cell_h - 3);
  }
  if (p.text_digits === null || p.text_digits === undefined) return;
  const colours = cellColours(image, p);
  g.font = p.cell_px >= 34 ? CELL_FONT_BIG : CELL_FONT_SMALL;
  g.textAlign = "center";
  g.textBaseline = "middle";
  for (let r = 0; r < p.rows; r++) {
    for (let c = 0; c < p.cols; c++) {
      const i = r * p.cols + c;
      if (masked && masked[i]) continue;
      const [red, green, blue] = colours.subarray(4 * i, 4 * i + 3);
      g.fillStyle = textColour(red, green, blue);
      g.fillText(fixed(values[i], p.text_digits), left + (c + 0.5) * p.cell_px, top + (r + 0.5) * p.cell_h);
    }
  }
}

// White or black, whichever stands out more (WCAG contrast) on a cell of this colour: white below a relative
// luminance of 0.179. A 0.299/0.587/0.114 mean below 140 had written white on mid blues and greens, 2.5:1 to 3:1
// where black gives 7:1 to 8.4:1.
function textColour(red, green, blue) {
  const linear = (v) => (v / 255 <= 0.04045 ? v / 255 / 12.92 : ((v / 255 + 0.055) / 1.055) ** 2.4);
  const luminance = 0.2126 * linear(red) + 0.7152 * linear(green) + 0.0722 * linear(blue);
  return (luminance + 0.05) ** 2 < 1.05 * 0.05 ? "#ffffff" : "#000000";
}

function cellColours(image, p) {
  const scratch = document.createElement("canvas");
  scratch.width = p.cols;
  scratch.height = p.rows;
  const g = scratch.getContext("2d");
  g.drawImage(image, 0, 0);
  return g.getImageData(0, 0, p.cols, p.rows).data;
}

function row(label, value) {
  const line = element("div", "mv-row");
  line.append(element("span", "mv-key", label), element("span", "mv-value", value));
  return line;
}

function hoverLines(p, values, masked, r, c) {
  const i = r * p.cols + c;
  const value = masked && masked[i] ? p.masked_text : fixed(values[i], p.value_digits);
  const [rowName, colName] = p.hover_titles || [p.y_title, p.x_title];
  const [rowNames, colNames] = p.hover_names || [p.y_labels, p.x_labels];
  const lines = [row(rowName, rowNames[r]), row(colName, colNames[c]), row(p.value_title, value)];
  for (const more of p.extra) lines.push(row(more.title, numberText(more.decoded[i], more.digits)));
  return lines;
}

// What every panel has: a box named after it holding an optional title and subtitle, then the canvas sized to `box`
// (CSS pixels) with its tooltip over it, hidden when the pointer leaves.
function panelShell(p, box) {
  const panel = element("div", "mv-panel");
  panel.dataset.name = p.name;
  if (p.title) panel.append(element("div", "mv-title", p.title));
  if (p.subtitle) panel.append(element("div", p.wrap_subtitle ? "mv-subtitle mv-wrap" : "mv-subtitle", p.subtitle));
  const frame = element("div", "mv-frame");
  const canvas = element("canvas");
  const tip = element("div", "mv-tip");
  frame.append(canvas, tip);
  panel.append(frame);
  const ratio = window.devicePixelRatio || 1;
  canvas.width = Math.ceil(box.width * ratio);
  canvas.height = Math.ceil(box.height * ratio);
  canvas.style.width = `${box.width}px`;
  canvas.style.height = `${box.height}px`;
  canvas.dataset.naturalWidth = String(box.width);
  canvas.dataset.naturalHeight = String(box.height);
  canvas.getContext("2d").scale(ratio, ratio);
  canvas.addEventListener("mouseleave", () => hideTips(panel));
  return { panel, frame, canvas, tip };
}

function hideTips(root) {
  for (const tip of root.querySelectorAll(".mv-tip")) tip.style.display = "none";
}

// A tip is fixed in the window, so a scroll would leave it over whatever slides under it: a wheel's, and a finger's
// on a phone, where a tap shows the tip and no mouse ever leaves the canvas. Scroll events do not bubble: one listener,
// on the document as they go down, from whichever element scrolls (Streamlit's main column), hides every board's tips
// whose canvas has moved since the tip was shown. Not the others: a scroll's event comes a frame late, after a pointer
// that scrolled the board into view has already shown a tip where it belongs (hiding it lost tests their tip).
const BOARDS = new Set();
document.addEventListener(
  "scroll",
  () => {
    for (const root of BOARDS) {
      if (root.isConnected) hideMovedTips(root);
      else BOARDS.delete(root);  // a board the page no longer shows
    }
  },
  { capture: true, passive: true },
);

function canvasPlace(tip) {
  const at = tip.parentElement.querySelector("canvas").getBoundingClientRect();
  return `${at.left},${at.top}`;
}

function hideMovedTips(root) {
  for (const tip of root.querySelectorAll(".mv-tip")) {
    if (tip.style.display !== "none" && canvasPlace(tip) !== tip.dataset.shownAt) tip.style.display = "none";
  }
}

// A panel wider than its board (a projector's narrow window, a long input) is shown smaller, never cut off: its
// canvas keeps its pixels and the browser scales it to the board's width; `scale` is that factor (1: as drawn).
function fitPanels(root) {
  const room = root.clientWidth;
  for (const canvas of root.querySelectorAll("canvas")) {
    const width = Number(canvas.dataset.naturalWidth);
    const height = Number(canvas.dataset.naturalHeight);
    const scale = room > 0 && width > room ? room / width : 1;
    canvas.style.width = `${width * scale}px`;
    canvas.style.height = `${height * scale}px`;
    canvas.dataset.scale = String(scale);
  }
}

// Where the pointer is on the canvas, in the CSS pixels the panel was laid out in (before fitPanels scaled it).
function pointer(canvas, event) {
  const scale = Number(canvas.dataset.scale || 1);
  return [event.offsetX / scale, event.offsetY / scale];
}

// The panel's picture: `draw(image)` once its PNG (a Blob) is decoded, which the browser does off the main thread;
// then the canvas is marked drawn.
function whenLoaded(png, canvas, draw) {
  createImageBitmap(png).then((image) => {
    draw(image);
    canvas.dataset.drawn = "true";
  });
}

// The tooltip holding `lines` next to the pointer, or hidden when there are none. It is placed in the window (CSS
// position: fixed), so that near the board's edge it is neither cut off by the board nor makes it scroll; where the
// window has no room right of or below the pointer, it goes left of or above it.
function showTip(shell, event, lines) {
  const { tip } = shell;
  if (!lines) {
    tip.style.display = "none";
    return;
  }
  tip.replaceChildren(...lines);
  tip.style.display = "block";
  tip.dataset.shownAt = canvasPlace(tip);  // where its canvas was: a scroll that moves it hides the tip
  const right = event.clientX + 16 + tip.offsetWidth <= window.innerWidth;
  const below = event.clientY + 16 + tip.offsetHeight <= window.innerHeight;
  tip.style.left = `${Math.max(0, right ? event.clientX + 16 : event.clientX - 12 - tip.offsetWidth)}px`;
  tip.style.top = `${Math.max(0, below ? event.clientY + 16 : event.clientY - 12 - tip.offsetHeight)}px`;
}

// A matrix with labelled axes and a legend; hover reads each cell's values.
function drawMatrix(p, setTriggerValue) {
  const box = layout(MEASURE, p);
  const shell = panelShell(p, box);
  const { canvas } = shell;
  canvas.dataset.plot = JSON.stringify({
    left: box.left, top: box.top, cell: p.cell_px, cell_h: p.cell_h, rows: p.rows, cols: p.cols,
    x_labels: box.xLabels, y_labels: box.yLabels, x_ticks: box.xTicks, y_ticks: box.yTicks,  // as the axes write them
  });
  const values = new Float32Array(p.values.buffer);
  const masked = p.masked || null;
  for (const more of p.extra) more.decoded = new Float32Array(more.values.buffer);
  whenLoaded(p.png, canvas, (image) => {
    const g = canvas.getContext("2d");
    drawCells(g, p, box, image, values, masked);
    drawAxes(g, p, box);
    if (p.legend) drawLegend(g, p, box);
  });

  const cellAt = (event) => {
    const [x, y] = pointer(canvas, event);
    const c = Math.floor((x - box.left) / p.cell_px);
    const r = Math.floor((y - box.top) / p.cell_h);
    return r >= 0 && c >= 0 && r < p.rows && c < p.cols ? [r, c] : null;
  };
  canvas.addEventListener("mousemove", (event) => {
    const cell = cellAt(event);
    showTip(shell, event, cell && hoverLines(p, values, masked, ...cell));
  });
  if (p.pick === "cell") {
    canvas.style.cursor = "pointer";
    canvas.addEventListener("click", (event) => {
      const cell = cellAt(event);
      if (cell) setTriggerValue("pick", { row: cell[0], col: cell[1] });
    });
  }
  return shell.panel;
}

const SHEET = { fontPx: 12, mostFontPx: 18, titleHeight: 18, gapX: 10, gapY: 4, margin: 3 };

// The titles' font, in the canvas's own pixels: 12 px as shown, so larger on a sheet fitPanels shrank (at 1024 px a
// 30 x 9 grid is shown at 0.64 and its 12 px titles read as 7.7 px on a projector), up to what the title band holds
// and the narrowest room a title has (its map and the gap to the next).
function sheetFont(g, p, box) {
  const scale = Number(g.canvas.dataset.scale || 1);
  let px = Math.min(SHEET.mostFontPx, Math.round(SHEET.fontPx / scale));
  const widest = p.titles.reduce((a, b) => (b.length > a.length ? b : a), "");
  for (; px > SHEET.fontPx; px--) {
    g.font = `${px}px ${FONT_FAMILY}`;
    if (g.measureText(widest).width <= box.mapW + SHEET.gapX - 2) break;
  }
  return `${px}px ${FONT_FAMILY}`;
}

// Where each small map of a sheet goes: the top-left corner of its cells, in CSS pixels, and the canvas size. The
// margin leaves room for the red frame round a map on the edge.
function sheetLayout(p) {
  const mapW = Math.round(p.cols * p.cell_px);  // whole pixels: the lines round each map fall on pixels, unblurred
  const mapH = Math.round(p.rows * p.cell_px);  // a sheet's cells are square
  const rows = Math.ceil(p.titles.length / p.columns);
  const maps = p.titles.map((_, i) => [
    SHEET.margin + (i % p.columns) * (mapW + SHEET.gapX),
    SHEET.titleHeight + Math.floor(i / p.columns) * (SHEET.titleHeight + mapH + SHEET.gapY),
  ]);
  return {
    mapW, mapH, maps,
    width: Math.ceil(2 * SHEET.margin + p.columns * mapW + (p.columns - 1) * SHEET.gapX),
    height: Math.ceil(rows * (SHEET.titleHeight + mapH) + (rows - 1) * SHEET.gapY + SHEET.margin),
  };
}

// Small maps of one shape, each under its title, cut from one picture (explorer.matrix_view.sheet_panel); hover
// names a map, a click sends back its pick.
function drawSheet(p, setTriggerValue) {
  const box = sheetLayout(p);
  const shell = panelShell(p, box);
  const { canvas } = shell;
  canvas.dataset.plot = JSON.stringify({ maps: box.maps, map_w: box.mapW, map_h: box.mapH, titles: p.titles });
  whenLoaded(p.png, canvas, (image) => {
    const g = canvas.getContext("2d");
    g.imageSmoothingEnabled = false;
    g.font = sheetFont(g, p, box);
    canvas.dataset.titleFont = g.font;
    g.fillStyle = TEXT;
    g.textBaseline = "bottom";
    box.maps.forEach(([x, y], i) => {
      const [across, down] = [i % p.columns, Math.floor(i / p.columns)];
      g.fillText(p.titles[i], x, y - 3);
      g.drawImage(image, across * p.cols, down * p.rows, p.cols, p.rows, x, y, box.mapW, box.mapH);
      g.strokeStyle = i === p.picked ? MARK : "#cccccc";
      g.lineWidth = i === p.picked ? 3 : 1;
      const out = g.lineWidth / 2;  // the line just outside the map's cells
      g.strokeRect(x - out, y - out, box.mapW + 2 * out, box.mapH + 2 * out);
    });
  });

  const mapAt = (event) => {
    const [px, py] = pointer(canvas, event);
    const i = box.maps.findIndex(([x, y]) => px >= x && px < x + box.mapW && py >= y && py < y + box.mapH);
    return i < 0 ? null : i;
  };
  canvas.addEventListener("mousemove", (event) => {
    const i = mapAt(event);
    showTip(shell, event, i === null ? null : [element("div", "mv-row", p.hovers[i])]);
    canvas.style.cursor = i !== null && p.picks ? "pointer" : "";
  });
  if (p.picks) {
    canvas.addEventListener("click", (event) => {
      const i = mapAt(event);
      if (i !== null) setTriggerValue("pick", p.picks[i]);
    });
  }
  return shell.panel;
}

// The board from views/matrix_view.py's packed() bytes: uint32 n, n bytes of JSON, then the blobs its panels point
// to ({blob: i}), each copied out (so that float32 values start aligned) and a PNG wrapped as a Blob.
function unpack(data) {
  const n = new DataView(data.buffer, data.byteOffset, 4).getUint32(0, true);
  const board = JSON.parse(new TextDecoder().decode(data.subarray(4, 4 + n)));
  const blob = (ref) => {
    const [offset, length] = board.blobs[ref.blob];
    return data.slice(4 + n + offset, 4 + n + offset + length);
  };
  for (const p of board.panels) {
    p.png = new Blob([blob(p.png)], { type: "image/png" });
    if (p.values) p.values = blob(p.values);
    if (p.masked) p.masked = blob(p.masked);
    for (const more of p.extra || []) more.values = blob(more.values);
  }
  return board;
}

export default function (component) {
  const { parentElement, setTriggerValue } = component;
  const data = unpack(component.data);
  let root = parentElement.querySelector(".mv-board");
  if (!root) {
    root = element("div", "mv-board");
    parentElement.append(root);
    new ResizeObserver(() => fitPanels(root)).observe(root);  // the window, or the sidebar, changed the room
    BOARDS.add(root);
  }
  const draw = { matrix: drawMatrix, sheet: drawSheet };
  root.replaceChildren(...data.panels.flatMap((p, i) => [
    ...(data.breaks.includes(i) ? [element("div", "mv-break")] : []),
    draw[p.kind](p, setTriggerValue),
  ]));
  fitPanels(root);
}
