package console

import (
	"embed"
	"io/fs"
	"net/http"
)

// webFiles are the console's pages: plain HTML, CSS and JavaScript, no
// build step. They hold no data; the page reads everything from the API
// with the user's token.
//
//go:embed web
var webFiles embed.FS

// csp allows the console's own files only: no inline script or style, no
// other origin, no framing.
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// web registers /console/ (the files) and / (a redirect to it).
func (c *Console) web() {
	sub, err := fs.Sub(webFiles, "web")
	if err != nil {
		panic(err) // the embedded directory is part of the build
	}
	files := http.StripPrefix("/console/", http.FileServerFS(sub))
	c.mux.Handle("GET /console/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", csp)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	}))
	c.mux.Handle("GET /{$}", http.RedirectHandler("/console/", http.StatusFound))
}
