// A workflow graph drawn as SVG by a small layered layout (left to right):
// cycles broken by a depth-first search from the start, layers by longest
// path, long edges through virtual points, order within a layer by a few
// barycenter sweeps, then boxes stacked and centred per layer. Executors can
// be marked (ran, running, waiting, failed...) as a run's events arrive.

import { h } from "./dom.js";

const NODE_H = 38;
const HUB_H = 24;
const LAYER_GAP = 84;
const ROW_GAP = 22;
const PAD = 16;
const FONT = "14px system-ui, -apple-system, 'Segoe UI', sans-serif";
const HUB_FONT = "11px system-ui, -apple-system, 'Segoe UI', sans-serif";
const HUBS = new Set(["fan-out", "fan-in", "switch"]);

let measureContext = null;
function textWidth(text, font) {
  measureContext ||= document.createElement("canvas").getContext("2d");
  measureContext.font = font;
  return measureContext.measureText(text).width;
}

/** The layered layout of a graph: node boxes and edge polylines, in pixels. */
export function layout(graph) {
  const nodes = (graph.nodes || []).map((node) => ({ ...node, label: node.label || node.id }));
  const byId = new Map(nodes.map((node) => [node.id, node]));
  const edges = (graph.edges || []).filter((e) => byId.has(e.source) && byId.has(e.target));
  const out = new Map(nodes.map((node) => [node.id, []]));
  edges.forEach((edge, index) => out.get(edge.source).push({ edge, index }));

  // Back edges: those reaching a node still on the depth-first stack.
  const back = new Set();
  const state = new Map();
  const discovery = [];
  const visit = (id) => {
    state.set(id, "open");
    discovery.push(id);
    for (const { edge, index } of out.get(id)) {
      if (edge.source === edge.target) back.add(index);
      else if (state.get(edge.target) === "open") back.add(index);
      else if (!state.has(edge.target)) visit(edge.target);
    }
    state.set(id, "done");
  };
  const roots = [graph.start, ...nodes.map((n) => n.id)].filter((id) => byId.has(id));
  for (const id of roots) if (!state.has(id)) visit(id);

  // Layers by longest path over the forward edges (Kahn's order).
  const layer = new Map(nodes.map((n) => [n.id, 0]));
  const indegree = new Map(nodes.map((n) => [n.id, 0]));
  edges.forEach((e, i) => back.has(i) || indegree.set(e.target, indegree.get(e.target) + 1));
  const queue = discovery.filter((id) => indegree.get(id) === 0);
  while (queue.length) {
    const id = queue.shift();
    for (const { edge, index } of out.get(id)) {
      if (back.has(index)) continue;
      layer.set(edge.target, Math.max(layer.get(edge.target), layer.get(id) + 1));
      indegree.set(edge.target, indegree.get(edge.target) - 1);
      if (indegree.get(edge.target) === 0) queue.push(edge.target);
    }
  }

  // Boxes, and virtual points for forward edges spanning several layers.
  const boxes = new Map();
  for (const node of nodes) {
    const hub = HUBS.has(node.kind);
    const width = Math.max(hub ? 48 : 64, textWidth(node.label, hub ? HUB_FONT : FONT) + (hub ? 18 : 28));
    boxes.set(node.id, { id: node.id, node, layer: layer.get(node.id), width, height: hub ? HUB_H : NODE_H });
  }
  const routes = edges.map((edge, index) => {
    const from = layer.get(edge.source);
    const to = layer.get(edge.target);
    const via = [];
    if (!back.has(index)) {
      for (let l = from + 1; l < to; l += 1) {
        const id = `\u0000v${index}:${l}`;
        boxes.set(id, { id, virtual: true, layer: l, width: 8, height: 8 });
        via.push(id);
      }
    }
    return { edge, index, back: back.has(index), chain: [edge.source, ...via, edge.target] };
  });

  // Order within layers: discovery order, then barycenter sweeps down and up.
  const layers = [];
  const rank = (id) => discovery.indexOf(id);
  for (const box of boxes.values()) (layers[box.layer] ||= []).push(box.id);
  for (const ids of layers) if (ids) ids.sort((a, b) => rank(a) - rank(b));
  const up = new Map();
  const down = new Map();
  for (const id of boxes.keys()) {
    up.set(id, []);
    down.set(id, []);
  }
  for (const route of routes) {
    if (route.back) continue;
    for (let i = 0; i + 1 < route.chain.length; i += 1) {
      down.get(route.chain[i]).push(route.chain[i + 1]);
      up.get(route.chain[i + 1]).push(route.chain[i]);
    }
  }
  const position = new Map();
  const remember = () => layers.forEach((ids) => ids && ids.forEach((id, i) => position.set(id, i)));
  remember();
  for (let sweep = 0; sweep < 6; sweep += 1) {
    const downward = sweep % 2 === 0;
    const order = downward ? layers.keys() : [...layers.keys()].reverse();
    for (const l of order) {
      const ids = layers[l];
      if (!ids) continue;
      const neighbours = downward ? up : down;
      const centre = new Map(
        ids.map((id) => {
          const around = neighbours.get(id).map((n) => position.get(n));
          return [id, around.length ? around.reduce((a, b) => a + b, 0) / around.length : position.get(id)];
        }),
      );
      ids.sort((a, b) => centre.get(a) - centre.get(b) || position.get(a) - position.get(b));
      ids.forEach((id, i) => position.set(id, i));
    }
  }

  // Coordinates: layers as columns, each column's boxes stacked and centred; a
  // gap wide enough for the labels of the edges that leave a column.
  const gaps = layers.map(() => LAYER_GAP);
  for (const route of routes) {
    if (route.back || !route.edge.label) continue;
    const l = layer.get(route.edge.source);
    gaps[l] = Math.max(gaps[l], textWidth(route.edge.label, HUB_FONT) + 40);
  }
  let x = PAD;
  const heights = layers.map((ids) => (ids || []).reduce((sum, id) => sum + boxes.get(id).height + ROW_GAP, -ROW_GAP));
  const tallest = Math.max(NODE_H, ...heights);
  layers.forEach((ids, l) => {
    if (!ids) return;
    const width = Math.max(...ids.map((id) => boxes.get(id).width));
    let y = PAD + (tallest - heights[l]) / 2;
    for (const id of ids) {
      const box = boxes.get(id);
      box.x = x + (width - box.width) / 2;
      box.y = y;
      y += box.height + ROW_GAP;
    }
    x += width + gaps[l];
  });
  const width = Math.max(x - gaps[layers.length - 1] + PAD, 2 * PAD + 64);
  const height = tallest + 2 * PAD + (routes.some((r) => r.back) ? 48 : 0);
  return { boxes, routes, width, height };
}

function edgePath(route, boxes) {
  const points = route.chain.map((id) => boxes.get(id));
  const source = points[0];
  const target = points[points.length - 1];
  if (route.edge.source === route.edge.target) {
    const cx = source.x + source.width / 2;
    return { d: `M ${cx - 10} ${source.y} C ${cx - 30} ${source.y - 34}, ${cx + 30} ${source.y - 34}, ${cx + 10} ${source.y}`, label: [cx, source.y - 30] };
  }
  if (route.back) {
    // Back to an earlier layer: under the boxes, from bottom to bottom.
    const sx = source.x + source.width / 2;
    const tx = target.x + target.width / 2;
    const sy = source.y + source.height;
    const ty = target.y + target.height;
    const dip = Math.max(sy, ty) + 36 + Math.min(60, Math.abs(sx - tx) / 6);
    return { d: `M ${sx} ${sy} C ${sx} ${dip}, ${tx} ${dip}, ${tx} ${ty}`, label: [(sx + tx) / 2, dip - 8] };
  }
  const anchors = points.map((box, i) => {
    const cy = box.y + box.height / 2;
    if (i === 0) return [[box.x + box.width, cy]];
    if (i === points.length - 1) return [[box.x, cy]];
    return [[box.x, cy], [box.x + box.width, cy]];
  }).flat();
  let d = `M ${anchors[0][0]} ${anchors[0][1]}`;
  for (let i = 1; i < anchors.length; i += 1) {
    const [x0, y0] = anchors[i - 1];
    const [x1, y1] = anchors[i];
    const bend = (x1 - x0) / 2;
    d += ` C ${x0 + bend} ${y0}, ${x1 - bend} ${y1}, ${x1} ${y1}`;
  }
  const middle = Math.floor((anchors.length - 1) / 2);
  const [ax, ay] = anchors[middle];
  const [bx, by] = anchors[middle + 1];
  return { d, label: [(ax + bx) / 2, (ay + by) / 2 - 6] };
}

/**
 * Draws `graph` ({nodes, edges, start}); returns {element, mark(executorId, mark)}.
 * Sub-workflows (nodes with a graph of their own) are drawn under the main picture.
 */
export function drawGraph(graph, { title = "Workflow graph" } = {}) {
  const { boxes, routes, width, height } = layout(graph);
  const markerId = `arrow-${Math.random().toString(36).slice(2, 8)}`;
  const svg = h(
    "svg:svg",
    { class: "graph", viewBox: `0 0 ${width} ${height}`, width, height, role: "group", "aria-label": title },
    h(
      "svg:defs",
      {},
      h(
        "svg:marker",
        { id: markerId, viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 9, markerHeight: 9, markerUnits: "userSpaceOnUse", orient: "auto-start-reverse" },
        h("svg:path", { d: "M 0 0 L 10 5 L 0 10 z", class: "arrowhead" }),
      ),
    ),
  );
  for (const route of routes) {
    const { d, label } = edgePath(route, boxes);
    const group = h("svg:g", { class: `edge edge-${route.edge.kind || "plain"}` });
    group.append(h("svg:path", { d, "marker-end": `url(#${markerId})` }));
    if (route.edge.label) {
      const text = route.edge.label;
      const w = textWidth(text, HUB_FONT) + 8;
      group.append(
        h("svg:rect", { x: label[0] - w / 2, y: label[1] - 9, width: w, height: 14, rx: 3, class: "edge-label-bg" }),
        h("svg:text", { x: label[0], y: label[1] + 2, class: "edge-label", "text-anchor": "middle" }, text),
      );
    }
    svg.append(group);
  }
  const nodeGroups = new Map();
  for (const box of boxes.values()) {
    if (box.virtual) continue;
    const node = box.node;
    const kind = node.id === graph.start && node.kind === "executor" ? "start" : node.kind || "executor";
    const group = h("svg:g", { class: `node kind-${kind}`, "data-id": node.id, tabindex: HUBS.has(kind) ? null : 0, role: HUBS.has(kind) ? null : "img" });
    const label = h("svg:title", {}, `${node.label}`);
    const rx = kind === "start" ? box.height / 2 : HUBS.has(kind) ? 4 : 6;
    group.append(label, h("svg:rect", { x: box.x, y: box.y, width: box.width, height: box.height, rx }));
    if (kind === "workflow") {
      group.append(h("svg:rect", { x: box.x + 3, y: box.y + 3, width: box.width - 6, height: box.height - 6, rx: 4, class: "inner" }));
    }
    group.append(
      h("svg:text", { x: box.x + box.width / 2, y: box.y + box.height / 2 + 4, "text-anchor": "middle" }, node.label),
    );
    svg.append(group);
    if (!HUBS.has(kind)) nodeGroups.set(node.id, { group, label, name: node.label });
  }

  const nested = [];
  const element = h("div", { class: "graph-box" }, h("div", { class: "graph-scroll" }, svg));
  for (const node of graph.nodes || []) {
    if (node.graph) {
      const inner = drawGraph(node.graph, { title: `Sub-workflow ${node.id}` });
      nested.push(inner);
      element.append(h("details", { class: "subgraph", open: true }, h("summary", {}, `Sub-workflow ${node.label || node.id}`), inner.element));
    }
  }

  function mark(executorId, what) {
    const found = nodeGroups.get(executorId);
    if (found) {
      for (const cls of [...found.group.classList]) if (cls.startsWith("mark-")) found.group.classList.remove(cls);
      if (what) found.group.classList.add(`mark-${what}`);
      found.group.dataset.mark = what || "";
      found.label.textContent = what ? `${found.name}: ${what}` : found.name;
      found.group.setAttribute("aria-label", found.label.textContent);
    }
    for (const inner of nested) inner.mark(executorId, what);
  }
  for (const { group, name } of nodeGroups.values()) group.setAttribute("aria-label", name);
  return { element, mark };
}

export const LEGEND = ["running", "waiting", "ran", "retrying", "failed"];

export function legend() {
  return h(
    "ul",
    { class: "legend", "aria-label": "Colours" },
    LEGEND.map((what) => h("li", {}, h("span", { class: `swatch mark-${what}`, "aria-hidden": "true" }), what)),
  );
}
