-- Demo changes applied between two ingestion runs: inserts, updates (including updates that
-- change a primary key) and deletes, in single statements and in a multi-statement transaction.
-- Safe to apply more than once.

INSERT INTO customers (email, full_name, country, tier, is_active, credit_limit, birth_date, created_at)
SELECT CONCAT('new', UUID_SHORT(), '-', seq, '@example.com'), CONCAT('New customer ', seq), 'NL', 'bronze',
       TRUE, 500.00, NULL, NOW(3)
FROM seq_1_to_25;

UPDATE customers SET tier = 'gold', credit_limit = COALESCE(credit_limit, 0) + 100 WHERE customer_id % 50 = 0;

DELETE FROM customers WHERE customer_id IN (7, 14, 21, 28);

UPDATE products SET price = price * 1.10, tags = 'sale,eco', attributes = JSON_OBJECT('promo', true)
WHERE sku LIKE 'ed-%3';

UPDATE products SET sku = CONCAT('X', sku) WHERE sku LIKE 'zz-%0';

DELETE FROM products WHERE sku LIKE 'ab-%7';

START TRANSACTION;
INSERT INTO orders (order_id, customer_id, status, total, ordered_at, shipped_at, note)
SELECT (SELECT MAX(order_id) FROM orders) + seq, 1 + seq, 'new', seq * 3.50, NOW(6), NULL, 'late order'
FROM seq_1_to_30;
UPDATE orders SET status = 'shipped', shipped_at = NOW(3) WHERE status = 'paid' AND order_id % 5 = 0;
DELETE FROM order_items WHERE order_id IN (SELECT order_id FROM orders WHERE status = 'cancelled' AND order_id % 3 = 0);
DELETE FROM orders WHERE status = 'cancelled' AND order_id % 3 = 0;
COMMIT;

UPDATE order_items SET line_no = line_no + 100 WHERE line_no = 1 AND order_id % 97 = 0;

UPDATE order_items SET quantity = quantity + 1, discount = 0.25 WHERE order_id % 13 = 0;
