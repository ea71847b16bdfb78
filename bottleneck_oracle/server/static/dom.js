// Building DOM nodes from data. Strings always become text nodes: nothing from a trace is ever parsed
// as markup (op names may hold "<script>"), so there is no HTML-string path in the page at all.

const SVG_NS = "http://www.w3.org/2000/svg";

function append(node, children) {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    node.appendChild(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

/** An HTML element: `attrs` are set with setAttribute (class, data-*, id...), children appended as text or nodes. */
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) if (v !== null && v !== undefined) node.setAttribute(k, String(v));
  return append(node, children);
}

/** An SVG element, the same way. */
export function svg(tag, attrs = {}, ...children) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs)) if (v !== null && v !== undefined) node.setAttribute(k, String(v));
  return append(node, children);
}

/** Replaces a node's children. */
export function fill(node, ...children) {
  node.replaceChildren();
  return append(node, children);
}

export function ms(value, digits = 3) {
  return value === null || value === undefined || Number.isNaN(Number(value)) ? "–" : `${Number(value).toFixed(digits)} ms`;
}
