package console

import (
	"embed"
	"io/fs"
	"net/http"
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
