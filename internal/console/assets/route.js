// hale console: routing by the URL's fragment; loaded last, it starts the page.
"use strict";

function route() {
  routeSeq++;
  timers.forEach(clearTimeout);
  timers = [];
  clearFlash();
  const view = document.getElementById("view");
  const parts = location.hash.replace(/^#\/?/, "").split("/").map(decodeURIComponent);
  if (parts[0] === "create") return viewCreate(view);
  if (parts[0] === "c" && parts[1]) {
    const name = parts[1];
    switch (parts[2]) {
      case "events": return viewEvents(view, name);
      case "logs": return parts.length > 3 ? viewLogStream(view, name, parts.slice(3).join("/")) : viewLogs(view, name);
      case "repairs": return viewRepairs(view, name, parts[3]);
      default: return viewCluster(view, name);
    }
  }
  return viewClusters(view);
}

window.addEventListener("hashchange", route);
document.getElementById("signout").addEventListener("click", async () => {
  await post("/console/signout", {}).catch(() => {});
  location.href = "/console/signin";
});
route();
