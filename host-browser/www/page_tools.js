// The demo page's own tools (issue 36, SPEC S5.9): two JavaScript functions
// registered with `rt.registerTool`, under the same fingerprint, approval,
// journal and bounds as every other tool. `lookup_product` reads this page's
// product table (read-only, automatic); `set_page_banner` changes the banner
// at the top of the page, declared as an external write, so the policy asks
// before it runs (S6.1). The panel that shows both is made here.

const products = new Map([
  ['kettle', { name: 'Kettle', price_eur: 39, stock: 12 }],
  ['teapot', { name: 'Teapot', price_eur: 24, stock: 0 }],
  ['mug', { name: 'Mug', price_eur: 9, stock: 140 }],
]);

function panel() {
  let section = document.getElementById('page-tools');
  if (section) return section;
  section = document.createElement('section');
  section.id = 'page-tools';
  section.className = 'panel';
  section.setAttribute('aria-labelledby', 'page-tools-title');
  const title = document.createElement('h2');
  title.id = 'page-tools-title';
  title.textContent = 'Page tools';
  const banner = document.createElement('p');
  banner.id = 'page-banner';
  banner.setAttribute('role', 'status');
  banner.textContent = 'No banner yet: ask the agent to set one.';
  const list = document.createElement('ul');
  list.id = 'page-products';
  for (const [id, p] of products) {
    const li = document.createElement('li');
    li.textContent = `${id}: ${p.name}, ${p.price_eur} €, ${p.stock} in stock`;
    list.append(li);
  }
  const hint = document.createElement('p');
  hint.className = 'hint';
  hint.textContent = 'lookup_product reads this table; set_page_banner changes the banner and asks first.';
  section.append(title, banner, list, hint);
  (document.getElementById('main-column') || document.body).append(section);
  return section;
}

/** Register the demo's two page tools on `rt`; resolves with their fingerprints. */
export async function registerDemoTools(rt) {
  panel();
  return Promise.all([
    rt.registerTool({
      name: 'lookup_product',
      description: 'Look a product of this shop up by its id (kettle, teapot, mug): name, price and stock.',
      parameters: { type: 'object', properties: { id: { type: 'string', maxLength: 40 } }, required: ['id'], additionalProperties: false },
      effects: ['read_local'], idempotency: 'idempotent', trust: 'user', offer: 'always',
      async execute({ id }) {
        return products.get(id) ?? { error: `no product ${id}; known: ${[...products.keys()].join(', ')}` };
      },
    }),
    rt.registerTool({
      name: 'set_page_banner',
      description: 'Show a short banner text at the top of the page tools panel.',
      parameters: { type: 'object', properties: { text: { type: 'string', minLength: 1, maxLength: 200 } }, required: ['text'], additionalProperties: false },
      effects: ['write_external'], idempotency: 'idempotent', target: { arg: 'text' }, timeout_ms: 5_000,
      async execute({ text }, ctx) {
        if (ctx.signal.aborted) throw new Error('stopped before the banner changed');
        panel().querySelector('#page-banner').textContent = text;
        return { shown: text };
      },
    }),
  ]);
}
