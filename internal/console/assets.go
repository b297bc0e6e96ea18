package console

import (
	"bytes"
	"embed"
	"io/fs"
	"net/http"
	"time"
)

// assets are the console's pages, style sheet and script, embedded: no build step, nothing to
// fetch at run time.
//
//go:embed assets
var assets embed.FS

// assetServer serves assets/ (the .html files are templates, rendered by their handlers).
func assetServer() http.Handler {
	sub, _ := fs.Sub(assets, "assets")
	return http.FileServerFS(sub)
}

// FaviconPath is where a browser asks for a site's icon unprompted (and the console's pages
// link it): hale server serves Favicon there, or the request would reach the API handler and
// count as an unknown operation in hale_api_requests_total.
const FaviconPath = "/favicon.ico"

// Favicon serves the console's icon (assets/favicon.ico: one 32×32 PNG in an ICO), cacheable
// for a day, to anyone: it is no secret, and a browser asks before any sign-in.
func Favicon(w http.ResponseWriter, r *http.Request) {
	ico, err := assets.ReadFile("assets/favicon.ico")
	if err != nil { // cannot happen: it is embedded
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "image/x-icon")
	w.Header().Set("Cache-Control", "public, max-age=86400")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	http.ServeContent(w, r, "favicon.ico", time.Time{}, bytes.NewReader(ico))
}
