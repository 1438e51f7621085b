// The runtime ships its wasm and glue as files the app passes by URL
// (`?url` imports); nothing else needs configuring.
import { defineConfig } from 'vite';

export default defineConfig({
  build: { outDir: 'dist', emptyOutDir: true, target: 'es2022' },
});
