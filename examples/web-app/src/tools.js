// The app's own tools (SPEC S5.9): JavaScript functions the model may call,
// under the runtime's fingerprint, approval, journal and bounds like every
// other tool. `lookup_order` reads this app's state and changes nothing;
// `mark_order_shipped` changes what the page shows and is declared an
// external write, so the runtime asks before it runs (S6.1).

const orders = new Map([
  ['A-1', { item: 'Kettle', status: 'packed' }],
  ['A-2', { item: 'Teapot', status: 'waiting for stock' }],
]);

function render() {
  let list = document.getElementById('orders');
  if (!list) {
    list = document.createElement('ul');
    list.id = 'orders';
    document.body.append(list);
  }
  list.replaceChildren(...[...orders].map(([id, o]) => {
    const item = document.createElement('li');
    item.textContent = `${id}: ${o.item}, ${o.status}`;
    item.dataset.status = o.status;
    return item;
  }));
}

/** Register the app's two tools on `rt`; resolves with their names and fingerprints. */
export async function registerExampleTools(rt) {
  render();
  const idSchema = { type: 'object', properties: { id: { type: 'string', maxLength: 20 } }, required: ['id'], additionalProperties: false };
  return Promise.all([
    rt.registerTool({
      name: 'lookup_order',
      description: 'Look an order up by its id (A-1, A-2): its item and status.',
      parameters: idSchema,
      effects: ['read_local'], idempotency: 'idempotent',
      async execute({ id }) {
        return orders.get(id) ?? { error: `no order ${id}` };
      },
    }),
    rt.registerTool({
      name: 'mark_order_shipped',
      description: 'Mark an order as shipped; the page shows the change.',
      parameters: idSchema,
      effects: ['write_external'], idempotency: 'idempotent', target: { arg: 'id' },
      async execute({ id }, ctx) {
        const order = orders.get(id);
        if (!order) throw new Error(`no order ${id}`);
        if (ctx.signal.aborted) throw new Error('stopped before the order changed');
        order.status = 'shipped';
        render();
        return { id, status: order.status };
      },
    }),
  ]);
}
