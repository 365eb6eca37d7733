// gssh's dashboard: reads the HTTP API with the session cookie every few
// seconds and draws the tables and plots. No library: DOM and SVG only.
"use strict";

const me = document.body.dataset.user;
const admin = document.body.dataset.admin === "true"; // may cancel every job
const SVG = "http://www.w3.org/2000/svg";
const $ = (sel) => document.querySelector(sel);

// api fetches a path of the API; a 401 sends the page to the login.
async function api(path, opt = {}) {
  opt.credentials = "same-origin";
  opt.headers = Object.assign({ "X-Gssh-Request": "1" }, opt.headers || {});
  const r = await fetch(path, opt);
  if (r.status === 401) {
    location.href = "/login";
    throw new Error("logged out");
  }
  const type = r.headers.get("Content-Type") || "";
  if (!r.ok) {
    let detail = r.statusText;
    if (type.includes("json")) detail = (await r.json()).detail || detail;
    const e = new Error(detail);
    e.status = r.status;
    throw e;
  }
  if (type.includes("x-ndjson")) return (await r.text()).split("\n").filter((l) => l).map((l) => JSON.parse(l));
  if (type.includes("json")) return r.json();
  return r.text();
}

function el(tag, attrs = {}, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") e.className = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v);
  }
  for (const k of kids) e.append(k instanceof Node ? k : document.createTextNode(k ?? ""));
  return e;
}

function svg(tag, attrs = {}) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  return e;
}

// bytes is b in IEC units, as gssh prints them.
function bytes(b) {
  if (b == null) return "-";
  const u = ["B", "KiB", "MiB", "GiB", "TiB"];
  if (b < 1 << 20) return Math.round(b / (1 << 20)) + " MiB"; // as gssh prints GPU memory
  let i = 0;
  while (b >= 1024 && i < u.length - 1) { b /= 1024; i++; }
  return (i >= 3 ? b.toFixed(1) : Math.round(b)) + " " + u[i];
}

function duration(s) {
  if (s == null || s < 0) return "-";
  if (s < 60) return Math.round(s) + "s";
  if (s < 3600) return Math.floor(s / 60) + "m" + String(Math.round(s % 60)).padStart(2, "0") + "s";
  return Math.floor(s / 3600) + "h" + String(Math.floor((s % 3600) / 60)).padStart(2, "0") + "m";
}

// bar is a memory bar: used, booked by gssh jobs beyond it, free.
function bar(total, used, booked) {
  const w = 160, h = 12;
  const s = svg("svg", { width: w, height: h, class: "bar", role: "img" });
  s.append(svg("rect", { width: w, height: h, class: "free" }));
  if (total > 0) {
    const u = Math.min(1, (used || 0) / total), b = Math.min(1 - u, Math.max(0, (booked - (used || 0)) / total));
    s.append(svg("rect", { width: Math.round(w * u), height: h, class: "used" }));
    s.append(svg("rect", { x: Math.round(w * u), width: Math.round(w * b), height: h, class: "booked" }));
  }
  return s;
}

function fill(table, rows) {
  const body = $(table + " tbody");
  body.replaceChildren(...rows);
}

function drawGPUs(doc) {
  const rows = [];
  for (const h of doc.hosts) {
    const jobs = h.gssh_jobs || [], procs = (h.gpu_processes || []).filter((p) => p.kind !== "job");
    if (!h.gpus || h.gpus.length === 0) {
      rows.push(el("tr", { class: "bad" }, el("td", {}, h.name), el("td", { colspan: 7 }, h.state + (h.error ? ": " + h.error : ""))));
      continue;
    }
    for (const g of h.gpus) {
      const mine = jobs.filter((j) => j.gpu_index === g.index);
      const held = mine.map((j) => `job ${j.array ? j.array + "_" + j.task : j.job} ${j.user} ${j.booked_bytes ? bytes(j.booked_bytes) : "excl"}`)
        .concat(procs.filter((p) => p.gpu_index === g.index).map((p) => `${p.name || "?"} (pid ${p.pid}, ${p.user || "?"}, ${bytes(p.used_memory_bytes)}: ${p.kind})`));
      const booked = mine.reduce((s, j) => s + (j.booked_bytes || g.memory_total_bytes || 0), 0);
      const state = g.health === "ok" ? (g.mig_mode === "Enabled" ? "ok (MIG)" : "ok") : g.health + (g.health_reason ? ": " + g.health_reason : "");
      rows.push(el("tr", { class: g.health === "ok" ? "" : "bad", "data-host": h.name },
        el("td", {}, h.name), el("td", {}, String(g.index)), el("td", {}, g.name || "-"),
        el("td", {}, bar(g.memory_total_bytes, g.memory_used_bytes, booked), " ", `${bytes(g.memory_used_bytes)} / ${bytes(g.memory_total_bytes)}`),
        el("td", {}, g.utilization_pct == null ? "-" : g.utilization_pct + "%"), el("td", {}, g.temperature_c == null ? "-" : g.temperature_c + "°C"),
        el("td", {}, held.join(", ") || "-"), el("td", {}, state + (h.drained ? " (drained)" : ""))));
      for (const m of g.mig_devices || []) {
        const onIt = jobs.filter((j) => j.gpu_id === m.uuid);
        rows.push(el("tr", { class: "mig" }, el("td", {}, h.name), el("td", {}, `${g.index}/mig${m.index}`), el("td", {}, "MIG " + m.profile),
          el("td", {}, bar(m.memory_total_bytes, m.memory_used_bytes, onIt.reduce((s, j) => s + (j.booked_bytes || m.memory_total_bytes || 0), 0)), " ",
            `${bytes(m.memory_used_bytes)} / ${bytes(m.memory_total_bytes)}`),
          el("td", {}, "-"), el("td", {}, "-"), el("td", {}, onIt.map((j) => `job ${j.job} ${j.user} ${j.booked_bytes ? bytes(j.booked_bytes) : "excl"}`).join(", ") || "-"), el("td", {}, "ok")));
      }
    }
  }
  fill("#gpus", rows);
}

function jobRef(j) { return j.spec.array ? `${j.spec.array.job}_${j.spec.array.task}` : String(j.id); }

// The queue's answers for the first waiting jobs (gssh show's "queue":
// place, reservation, forecast), by job id; and each running job's GPU
// memory in use, from the GPU table's processes.
const queueOf = new Map();
let inUse = new Map();

function place(q) {
  if (!q) return "";
  let s = q.position ? `#${q.position}` : "";
  if (q.reservation && q.reservation.from) s += `; reserved ${q.reservation.host}:${(q.reservation.indexes || []).join(",")} from ${clock(q.reservation.from)}`;
  else if (q.forecast && q.forecast.start) s += `; expected ${q.forecast.estimated ? "about " : ""}${clock(q.forecast.start)}`;
  return s;
}

function clock(t) {
  const d = new Date(t);
  return d.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" }) + (d.toDateString() === new Date().toDateString() ? "" : " " + d.toLocaleDateString());
}

function drawJobs(doc) {
  const now = Date.now();
  fill("#jobs", doc.jobs.map((j) => {
    const started = j.started_at ? Date.parse(j.started_at) : 0;
    const runtime = started ? duration((now - started) / 1000) : "-";
    const p = j.placement || {};
    const where = p.host ? `${p.host}:${(p.indexes || []).map((x, i) => (p.mig_devices && p.mig_devices[i] >= 0 ? `${x}/mig${p.mig_devices[i]}` : x)).join(",")}` : "-";
    const cmd = (j.spec.name ? j.spec.name + ": " : "") + (j.spec.argv || []).join(" ");
    const cancel = j.user === me || admin ? el("button", { class: "cancel", "data-job": j.id, onclick: () => cancelJob(j) }, "cancel") : "";
    return el("tr", { "data-job": j.id, class: j.state },
      el("td", {}, el("a", { href: "#", onclick: (e) => { e.preventDefault(); showJob(j); } }, jobRef(j))),
      el("td", {}, j.user), el("td", {}, j.state), el("td", {}, where),
      el("td", {}, (j.spec.mem_per_gpu_bytes ? bytes(j.spec.mem_per_gpu_bytes) : "excl") + (inUse.has(j.id) ? " / " + bytes(inUse.get(j.id)) : "")),
      el("td", {}, runtime),
      reasonCell(j),
      el("td", {}, j.state === "queued" ? place(queueOf.get(j.id)) : ""),
      el("td", { class: "cmd" }, cmd), el("td", {}, cancel));
  }));
}

// reasonCell is why a job waits, cut to its first 140 characters (the
// whole of it on hover, and in gssh show), or that a running one idles.
function reasonCell(j) {
  if (j.state === "running" && j.gpu_use && j.gpu_use.idle) return el("td", { class: "reason" }, `idle: its GPUs at 0 % since ${clock(j.gpu_use.idle_since)}`);
  if (j.state !== "queued") return el("td", { class: "reason" }, "");
  const r = j.reason || "";
  return el("td", { class: "reason", title: r }, r.length > 140 ? r.slice(0, 139) + "…" : r);
}

async function cancelJob(j) {
  if (!confirm(`Cancel job ${jobRef(j)}?`)) return;
  try {
    await api(`/v1/jobs/${j.id}`, { method: "DELETE" });
    say(`job ${jobRef(j)} cancelled`);
  } catch (e) {
    say(`job ${jobRef(j)}: ${e.message}`, true);
  }
  refresh();
}

// detailJob is the job whose detail is open: each refresh reads it again.
let detailJob = null;

async function showJob(j) {
  detailJob = j;
  $("#detail").hidden = false;
  $("#detail-title").textContent = `job ${jobRef(j)} (${j.user}, ${j.state}): its memory, the last 50 lines of its log`;
  try {
    const m = await api(`/v1/jobs/${j.id}/memory`);
    const pts = m.samples.map((s) => [Date.parse(s.time), s.bytes / 2 ** 30]);
    if (pts.length === 0) $("#detail-mem").replaceChildren(el("p", { class: "hint" }, "no sample yet (gssh serve samples every 10 s while the job runs)"));
    else line("#detail-mem", pts, Math.max(60e3, Date.now() - pts[0][0]), "GiB");
  } catch (e) {
    $("#detail-mem").replaceChildren(el("p", { class: "hint" }, e.message));
  }
  try {
    $("#detail-log").textContent = (await api(`/v1/jobs/${j.id}/log?tail=50`)) || "(empty)";
  } catch (e) {
    $("#detail-log").textContent = e.status === 403 ? "Only its owner and the admins may read its log." : e.message;
  }
}

function drawHosts(doc) {
  fill("#hosts", doc.hosts.map((h) => el("tr", { class: h.state === "ok" ? "" : "bad" },
    el("td", {}, h.name), el("td", {}, h.state + (h.error ? ": " + h.error : "")), el("td", {}, h.source || "-"),
    el("td", {}, h.driver_version || "-"), el("td", {}, String(h.gpu_count ?? "-")),
    el("td", {}, h.drained ? `by ${h.drained.by}${h.drained.reason ? ": " + h.drained.reason : ""}` : "-"))));
}

function drawUsage(doc) {
  const pct = (x) => Math.round((x || 0) * 100) + "%";
  fill("#usage", doc.users.map((u) => el("tr", {}, el("td", {}, u.user), el("td", {}, String(u.weight)),
    el("td", {}, `${u.running_jobs} (${(u.running_gpus || 0).toFixed(1)} GPUs)`), el("td", {}, String(u.queued_jobs)),
    el("td", {}, (u.gpu_hours || 0).toFixed(2)), el("td", {}, pct(u.share)), el("td", {}, pct(u.fair)), el("td", {}, String(u.rank)))));
}

// series turns the event log's lines into GPUs in use and jobs waiting
// over time (steps), and GPU-hours per user.
function series(events) {
  const gpus = [], queue = [], hours = {};
  let g = 0, q = 0;
  const waiting = new Set(), running = new Map();
  for (const e of events) {
    const t = Date.parse(e.time);
    switch (e.event) {
      case "job_submit": case "job_requeue": waiting.add(e.job); break;
      case "job_start": waiting.delete(e.job); running.set(e.job, (e.gpus || []).length || 1); break;
      case "job_end":
        waiting.delete(e.job);
        running.delete(e.job);
        if (e.user) hours[e.user] = (hours[e.user] || 0) + (e.gpu_hours || 0);
        break;
      default: continue;
    }
    g = [...running.values()].reduce((s, n) => s + n, 0);
    q = waiting.size;
    gpus.push([t, g]);
    queue.push([t, q]);
  }
  return { gpus, queue, hours };
}

// line draws points [t, y] as a step line over the last span ms.
function line(target, points, span, unit) {
  const w = 320, h = 120, now = Date.now(), from = now - span;
  const max = Math.max(unit ? 0.1 : 1, ...points.map((p) => p[1]));
  const s = svg("svg", { width: w, height: h + 16, class: "plot" });
  s.append(svg("line", { x1: 0, y1: h, x2: w, y2: h, class: "axis" }));
  let d = "", last = 0;
  for (const [t, y] of points) {
    if (t < from) { last = y; continue; }
    const x = ((t - from) / span) * w;
    d += (d ? "" : `M0,${h - (last / max) * h}`) + ` H${x.toFixed(1)} V${(h - (y / max) * h).toFixed(1)}`;
    last = y;
  }
  d = (d || `M0,${h - (last / max) * h}`) + ` H${w}`;
  s.append(svg("path", { d, class: "series" }));
  const label = (x, y, text, anchor) => {
    const l = svg("text", { x, y, class: "label", "text-anchor": anchor || "start" });
    l.textContent = text;
    s.append(l);
  };
  label(2, 12, `max ${unit ? max.toFixed(1) + " " + unit : max}`);
  label(0, h + 13, span >= 3600e3 ? `${Math.round(span / 3600e3)} h ago` : `${Math.round(span / 60e3)} min ago`);
  label(w, h + 13, "now", "end");
  $(target).replaceChildren(s);
}

function bars(target, values) {
  const names = Object.keys(values).sort((a, b) => values[b] - values[a]);
  if (names.length === 0) {
    $(target).replaceChildren(el("p", { class: "hint" }, "no job has ended in these 7 days"));
    return;
  }
  const w = 320, row = 18, max = Math.max(0.01, ...Object.values(values));
  const s = svg("svg", { width: w, height: Math.max(row, names.length * row), class: "plot" });
  names.forEach((n, i) => {
    s.append(svg("rect", { x: 80, y: i * row + 3, height: row - 6, width: Math.max(1, ((w - 140) * values[n]) / max), class: "series-bar" }));
    const a = svg("text", { x: 0, y: i * row + 13, class: "label" });
    a.textContent = n;
    const b = svg("text", { x: 84 + ((w - 140) * values[n]) / max, y: i * row + 13, class: "label" });
    b.textContent = values[n].toFixed(2);
    s.append(a, b);
  });
  $(target).replaceChildren(s);
}

function say(text, bad) {
  const s = $("#status");
  s.textContent = text;
  s.classList.toggle("bad", !!bad);
}

let plotsAt = 0, queueAt = 0;

// memoryInUse is each job's GPU memory in use per GPU (as --mem books
// it): its processes' memory, summed per GPU, the most of its GPUs.
function memoryInUse(doc) {
  const perGPU = new Map();
  for (const h of doc.hosts) {
    for (const p of h.gpu_processes || []) {
      if (p.kind !== "job" || !p.job) continue;
      const k = p.job + "/" + h.name + "/" + p.gpu_id;
      perGPU.set(k, (perGPU.get(k) || 0) + (p.used_memory_bytes || 0));
    }
  }
  const m = new Map();
  for (const [k, b] of perGPU) {
    const job = Number(k.split("/")[0]);
    m.set(job, Math.max(m.get(job) || 0, b));
  }
  return m;
}

async function refresh() {
  try {
    const [gpus, jobs, hosts, usage] = await Promise.all([api("/v1/gpus"), api("/v1/jobs"), api("/v1/hosts"), api("/v1/usage")]);
    drawGPUs(gpus);
    inUse = memoryInUse(gpus);
    if (Date.now() - queueAt > 15000) {
      // The queue's answer costs a plan each: the first five waiting jobs, every 15 s.
      queueAt = Date.now();
      const waiting = jobs.jobs.filter((j) => j.state === "queued").slice(0, 5);
      const shown = await Promise.all(waiting.map((j) => api(`/v1/jobs/${j.id}`).catch(() => null)));
      queueOf.clear();
      shown.forEach((d, i) => d && queueOf.set(waiting[i].id, d.queue));
    }
    drawJobs(jobs);
    if (detailJob) showJob(jobs.jobs.find((j) => j.id === detailJob.id) || detailJob);
    drawHosts(hosts);
    drawUsage(usage);
    if (Date.now() - plotsAt > 30000) {
      plotsAt = Date.now();
      const day = await api("/v1/events?since=24h&kind=job_submit&kind=job_requeue&kind=job_start&kind=job_end");
      const week = await api("/v1/events?since=7d&kind=job_end");
      const s = series(day);
      line("#plot-gpus", s.gpus, 24 * 3600e3);
      line("#plot-queue", s.queue, 24 * 3600e3);
      bars("#plot-users", series(week).hours);
    }
    say("updated " + new Date().toLocaleTimeString());
  } catch (e) {
    say("cannot reach gssh serve (" + e.message + "): retrying…", true);
  }
}

refresh();
setInterval(refresh, 3000);
