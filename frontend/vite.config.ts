import { defineConfig } from "vite";
import vue from "@vitejs/plugin-vue";

// Served by Flask at "/": assets are referenced from the site root.
// `npm run dev` proxies the API and the socket to a local `python run.py` (port 5000).
export default defineConfig({
  base: "/",
  plugins: [vue()],
  build: {
    outDir: "dist",
    emptyOutDir: true,
    // mermaid's largest layout engine (elk, ~1.5 MB) is a chunk of its own, fetched only for a diagram that uses it
    chunkSizeWarningLimit: 1600,
  },
  server: {
    proxy: {
      "/api": "http://127.0.0.1:5000",
      "/healthz": "http://127.0.0.1:5000",
      "/socket.io": { target: "http://127.0.0.1:5000", ws: true },
    },
  },
});
