// hale console: a cluster's events, logs and repairs tabs (console.js has the helpers).
"use strict";

function viewEvents(view, name) {
  crumbs([name, "#/c/" + enc(name)], ["Events"]);
  const body = h("tbody", { id: "events" });
  const level = h("select", { id: "f-level" }, h("option", { value: "" }, "any"), ["Info", "Warn", "Error"].map((l) => h("option", { value: l }, l)));
  const type = h("select", { id: "f-type" }, h("option", { value: "" }, "any"), ["Cluster", "InstanceGroup", "Instance"].map((l) => h("option", { value: l }, l)));
  const group = h("input", { id: "f-group", placeholder: "group name", size: 12 });
  const inst = h("input", { id: "f-instance", placeholder: "i-…", size: 20 });
  const text = h("input", { id: "f-text", placeholder: "text", size: 16 });
  view.replaceChildren(liveHeader(name), clusterTabs(name, "events"),
    h("div", { class: "filters" }, h("label", {}, "Level", level), h("label", {}, "Resource", type), h("label", {}, "Group", group),
      h("label", {}, "Instance", inst), h("label", {}, "Contains", text)),
    h("div", { class: "table-wrap" }, h("table", {}, h("thead", {}, h("tr", {}, h("th", {}, "Time"), h("th", {}, "Level"),
      h("th", { class: "opt" }, "Resource"), h("th", {}, "Description"))), body)));
  poll(async () => {
    const q = new URLSearchParams({ level: level.value, type: type.value, group: group.value.trim(), instance: inst.value.trim(), q: text.value.trim() });
    const evs = await getJSON("/clusters/" + enc(name) + "/events?" + q);
    body.replaceChildren(...(evs.length ? evs.map((e) => h("tr", { "data-event": e.ID },
      h("td", { class: "mono", title: ago(e.Time) }, stamp(e.Time)), h("td", {}, badge(e.Level)),
      h("td", { class: "opt" }, e.ResourceType, e.Group ? h("div", { class: "muted" }, e.Group) : null, e.InstanceID ? h("div", { class: "muted mono" }, e.InstanceID) : null),
      h("td", {}, e.Description))) : [h("tr", {}, h("td", { colspan: 4, class: "muted" }, "No events match."))]));
  });
}

function viewLogs(view, name) {
  crumbs([name, "#/c/" + enc(name)], ["Logs"]);
  const body = h("tbody", { id: "streams" });
  view.replaceChildren(liveHeader(name), clusterTabs(name, "logs"),
    h("div", { class: "table-wrap" }, h("table", {}, h("thead", {}, h("tr", {}, h("th", {}, "Log stream"), h("th", {}, "Last event"))), body)));
  poll(async () => {
    const ans = await getJSON("/clusters/" + enc(name) + "/logs");
    const ss = ans.Streams || [];
    body.replaceChildren(...(ss.length ? ss.map((s) => h("tr", { "data-stream": s.Name },
      h("td", { class: "mono" }, h("a", { href: "#/c/" + enc(name) + "/logs/" + enc(s.Name) }, s.Name)),
      h("td", { title: stamp(s.LastEvent) }, ago(s.LastEvent)))) : [h("tr", {}, h("td", { colspan: 2, class: "muted" }, "No log streams yet."))]));
  }, 5000);
}

function viewLogStream(view, name, stream) {
  crumbs([name, "#/c/" + enc(name)], ["Logs", "#/c/" + enc(name) + "/logs"], [stream]);
  const pre = h("pre", { class: "log", id: "log" });
  const follow = h("input", { type: "checkbox", id: "follow", checked: true });
  const count = h("span", { class: "muted", id: "line-count" }, "");
  view.replaceChildren(liveHeader(name), clusterTabs(name, "logs"),
    h("div", { class: "row" }, h("h2", { class: "mono" }, stream), h("span", { class: "spacer" }),
      h("label", { class: "row" }, follow, "Follow live"), count),
    pre);
  let after = 0, lines = 0;
  poll(async () => {
    if (!follow.checked && after > 0) return;
    for (;;) {
      const ans = await getJSON("/clusters/" + enc(name) + "/logs?" + new URLSearchParams({ stream, after }));
      const ls = ans.Lines || [];
      const atEnd = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
      for (const l of ls) pre.append(h("span", { class: "t" }, stamp(l.Time) + " "), l.Message + "\n");
      lines += ls.length;
      after = ans.NextSeq;
      count.textContent = lines + " line(s)";
      if (ls.length && follow.checked && atEnd) pre.scrollTop = pre.scrollHeight;
      if (ls.length < 1000) break;
    }
  }, 1000);
}

function viewRepairs(view, name, id) {
  crumbs([name, "#/c/" + enc(name)], ["Repairs", id ? "#/c/" + enc(name) + "/repairs" : null], ...(id ? [[id]] : []));
  const box = h("div", { id: id ? "repair" : "repairs" });
  view.replaceChildren(liveHeader(name), clusterTabs(name, "repairs"), box);
  poll(async () => {
    const rs = await getJSON("/clusters/" + enc(name) + "/repairs");
    if (id) {
      const r = rs.find((x) => x.ID === id);
      box.replaceChildren(r ? repairDetail(r) : h("p", { class: "muted" }, "No repair " + id + " in the last 30 days."));
      return;
    }
    box.replaceChildren(h("div", { class: "table-wrap" }, h("table", {},
      h("thead", {}, h("tr", {}, h("th", {}, "Started"), h("th", {}, "Node"), h("th", {}, "Fault"), h("th", {}, "Action"), h("th", {}, "State"), h("th", { class: "opt" }, "Last step"))),
      h("tbody", {}, rs.length ? rs.map((r) => h("tr", { "data-repair": r.ID },
        h("td", {}, h("a", { href: "#/c/" + enc(name) + "/repairs/" + enc(r.ID) }, stamp(r.CreatedAt))),
        h("td", { class: "mono" }, r.LogicalID, h("div", { class: "muted" }, r.InstanceID)),
        h("td", {}, r.Fault), h("td", {}, r.Action), h("td", {}, badge(r.State)),
        h("td", { class: "opt" }, r.Timeline && r.Timeline.length ? r.Timeline[r.Timeline.length - 1].What : ""))) :
        [h("tr", {}, h("td", { colspan: 6, class: "muted" }, "No repairs in the last 30 days."))]))));
  });
}

function repairDetail(r) {
  const steps = r.Timeline || [];
  const t0 = steps.length ? new Date(steps[0].At).getTime() : 0;
  return h("div", {},
    h("div", { class: "card" }, h("dl", { class: "facts" },
      h("dt", {}, "Node"), h("dd", { class: "mono" }, r.LogicalID + " (" + r.InstanceID + (r.NewInstanceID ? " → " + r.NewInstanceID : "") + ")"),
      h("dt", {}, "Fault"), h("dd", {}, r.Fault),
      h("dt", {}, "Action"), h("dd", {}, r.Action + " (from " + r.Source + ")"),
      h("dt", {}, "State"), h("dd", { id: "repair-state" }, badge(r.State)),
      h("dt", {}, "Reason"), h("dd", {}, r.Reason),
      r.Message ? [h("dt", {}, "Message"), h("dd", {}, r.Message)] : null)),
    h("h2", {}, "Timeline"),
    h("ol", { class: "timeline", id: "timeline" }, steps.map((s) => h("li", {},
      h("div", { class: "when" }, stamp(s.At), h("span", { class: "delta" }, "+" + ((new Date(s.At).getTime() - t0) / 1000).toFixed(1) + "s")),
      h("div", {}, s.What)))));
}
