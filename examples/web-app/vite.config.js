// The runtime ships its wasm and glue as files the app passes by URL
// (`?url` imports); nothing else needs configuring. Two pages: the run
// rendered from its events (index.html) and the AI SDK chat (chat.html,
// React).
import { defineConfig } from 'vite';
import react from '@vitejs/plugin-react';

export default defineConfig({
  plugins: [react()],
  build: {
    outDir: 'dist', emptyOutDir: true, target: 'es2022',
    rolldownOptions: { input: { main: 'index.html', chat: 'chat.html' } },
  },
});
