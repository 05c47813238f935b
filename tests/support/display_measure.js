// The table page measured in the page itself (tests/browser/test_display_matrix.py): every visible
// element inside the viewport, every text's boxes with the font's internal leading taken off
// (0.2 em above, 0.12 em below) checked against every other text's and against what clips it,
// each text's effective font size (an SVG text's times its scale) and its contrast ratio
// against the colour under its centre (the nearest background or SVG shape below it).
() => {
  const W = innerWidth, H = innerHeight;
  const problems = [];
  const visible = (e) => {
    if (!e || !e.isConnected) return false;
    if (e.checkVisibility && !e.checkVisibility({ visibilityProperty: true, opacityProperty: true })) return false;
    const r = e.getBoundingClientRect();
    return r.width > 0 && r.height > 0;
  };
  const name = (e) => e.id ? "#" + e.id : e.tagName.toLowerCase()
    + (e.getAttribute("class") ? "." + e.getAttribute("class").trim().split(/\s+/).join(".") : "");
  const where = (e) => {
    const parts = [];
    for (let x = e; x && x !== document.body && parts.length < 4; x = x.parentElement) parts.unshift(name(x));
    return parts.join(" > ");
  };
  const box = (r) => [r.left, r.top, r.right, r.bottom].map((v) => Math.round(v));
  for (const e of document.body.querySelectorAll("*")) {
    if (e.closest("defs") || !visible(e)) continue;
    const r = e.getBoundingClientRect();
    if (r.left < -1 || r.top < -1 || r.right > W + 1 || r.bottom > H + 1) {
      problems.push("outside the viewport: " + where(e) + " " + box(r));
    }
  }
  if (document.querySelector("[style*='opacity'], .void")) {
    for (const e of document.querySelectorAll("*")) {
      if (visible(e) && getComputedStyle(e).opacity !== "1") problems.push("translucent: " + where(e));
    }
  }
  const rgba = (c) => {
    const m = /rgba?\(([^)]+)\)/.exec(c || "");
    if (!m) return null;
    const v = m[1].split(/[ ,/]+/).filter(Boolean).map(Number);
    return [v[0], v[1], v[2], v.length > 3 ? v[3] : 1];
  };
  const luminance = ([r, g, b]) => {
    const f = (x) => { x /= 255; return x <= 0.03928 ? x / 12.92 : ((x + 0.055) / 1.055) ** 2.4; };
    return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b);
  };
  const over = (top, under) => {  // top (with alpha) over an opaque colour
    const a = top[3];
    return [0, 1, 2].map((i) => top[i] * a + under[i] * (1 - a)).concat([1]);
  };
  const SHAPES = new Set(["circle", "rect", "path", "ellipse", "polygon"]);
  // The colour under a point: the backgrounds and SVG shapes below ``start`` in the stack.
  const backgroundAt = (x, y, start) => {
    const stack = document.elementsFromPoint(x, y);
    let k = stack.indexOf(start);
    if (k < 0) k = 0;
    const layers = [];
    for (const e of stack.slice(k)) {
      const s = getComputedStyle(e);
      let c = null;
      if (e instanceof SVGElement) {
        if (SHAPES.has(e.tagName) && s.fill && s.fill !== "none") c = rgba(s.fill);
      } else {
        c = rgba(s.backgroundColor);
      }
      if (c && c[3] > 0) { layers.push(c); if (c[3] >= 1) break; }
    }
    let colour = [0, 0, 0, 1];  // the page's own black
    for (const c of layers.reverse()) colour = over(c, colour);
    return colour;
  };
  const texts = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    if (!n.data.trim()) continue;
    const e = n.parentElement;
    if (!visible(e) || e.closest("defs, title, script, style")) continue;
    const svg = e instanceof SVGElement;
    const s = getComputedStyle(e);
    const size = parseFloat(s.fontSize) * (svg ? e.getScreenCTM().a : 1);
    const range = document.createRange();
    range.selectNodeContents(n);
    let rects = [...range.getClientRects()].filter((r) => r.width > 0.5 && r.height > 0.5);
    if (svg && !rects.length) rects = [e.getBoundingClientRect()];
    if (!rects.length) continue;
    // clipped by an element that hides its overflow?
    for (let a = e; a && a !== document.documentElement; a = a.parentElement) {
      const o = getComputedStyle(a);
      if (o.overflowX === "visible" && o.overflowY === "visible") continue;
      const c = a.getBoundingClientRect();
      for (const r of rects) {
        if (r.left < c.left - 1 || r.right > c.right + 1 || r.top < c.top - 1 || r.bottom > c.bottom + 1) {
          problems.push("text cut off by " + (where(a) || "the page") + ": " + JSON.stringify(n.data.trim().slice(0, 40)));
          break;
        }
      }
    }
    const fg = rgba(svg ? s.fill : s.color);
    const first = rects[0];
    const bg = backgroundAt((first.left + first.right) / 2, (first.top + first.bottom) / 2, e);
    const colour = fg[3] < 1 ? over(fg, bg) : fg;
    const L1 = luminance(colour), L2 = luminance(bg);
    const ratio = (Math.max(L1, L2) + 0.05) / (Math.min(L1, L2) + 0.05);
    const ink = rects.map((r) => ({ left: r.left + 1, right: r.right - 1,
      top: r.top + 0.2 * size, bottom: r.bottom - 0.12 * size }));
    texts.push({ text: n.data.trim().slice(0, 40), where: where(e), size, ratio,
      records: !!e.closest(".recall-records"), ink });
  }
  for (let i = 0; i < texts.length; i += 1) {
    for (let j = i + 1; j < texts.length; j += 1) {
      const hit = texts[i].ink.some((a) => texts[j].ink.some((b) =>
        Math.min(a.right, b.right) - Math.max(a.left, b.left) > 1
        && Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top) > 1));
      if (hit) {
        problems.push("texts overlap: " + JSON.stringify(texts[i].text) + " (" + texts[i].where + ") and "
          + JSON.stringify(texts[j].text) + " (" + texts[j].where + ")");
      }
    }
  }
  return { problems, texts: texts.map(({ ink, ...t }) => t) };
}
