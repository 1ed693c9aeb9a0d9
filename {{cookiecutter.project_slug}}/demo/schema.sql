-- Demo schema: four tables with different key shapes and realistic column types.
-- Rows come from MariaDB's SEQUENCE engine (seq_1_to_N), so the script is self-contained.

CREATE TABLE customers (
  customer_id  INT NOT NULL AUTO_INCREMENT PRIMARY KEY,          -- integer key
  email        VARCHAR(191) NOT NULL,
  full_name    VARCHAR(100) NOT NULL,
  country      CHAR(2) NOT NULL,
  tier         ENUM('bronze','silver','gold') NOT NULL DEFAULT 'bronze',
  is_active    BOOLEAN NOT NULL DEFAULT TRUE,
  credit_limit DECIMAL(12,2) NULL,
  birth_date   DATE NULL,
  created_at   DATETIME(3) NOT NULL,
  updated_at   TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP,
  UNIQUE KEY uq_customers_email (email)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci;

INSERT INTO customers (email, full_name, country, tier, is_active, credit_limit, birth_date, created_at)
SELECT CONCAT('user', seq, '@example.com'),
       CONCAT('Customer ', seq),
       ELT(1 + seq % 5, 'DE', 'FR', 'US', 'BR', 'JP'),
       ELT(1 + seq % 3, 'bronze', 'silver', 'gold'),
       seq % 7 <> 0,
       IF(seq % 4 = 0, NULL, seq * 10.25),
       IF(seq % 5 = 0, NULL, DATE '1960-01-01' + INTERVAL seq * 13 DAY),
       TIMESTAMP '2024-01-01 00:00:00' + INTERVAL seq * 3571 SECOND + INTERVAL seq * 1000 MICROSECOND
FROM seq_1_to_400;

CREATE TABLE products (
  sku          VARCHAR(32) NOT NULL PRIMARY KEY,                 -- string key, case-insensitive collation
  title        VARCHAR(200) NOT NULL,
  price        DECIMAL(10,2) NOT NULL,
  weight_kg    FLOAT NULL,
  tags         SET('new','sale','eco','fragile') NOT NULL DEFAULT '',
  attributes   JSON NULL,
  stock        INT UNSIGNED NOT NULL DEFAULT 0,
  launched     YEAR NULL,
  discontinued BIT(1) NOT NULL DEFAULT b'0'
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci;

-- Mixed case and accents on purpose: 'Éc-...' sorts with 'ec-...' in utf8mb4_general_ci.
INSERT INTO products (sku, title, price, weight_kg, tags, attributes, stock, launched, discontinued)
SELECT CONCAT(ELT(1 + seq % 5, 'ab', 'AB', 'Éc', 'ed', 'zz'), '-', LPAD(seq, 5, '0')),
       CONCAT('Product ', seq),
       ROUND(1 + seq * 0.37, 2),
       IF(seq % 6 = 0, NULL, seq / 8),
       ELT(1 + seq % 4, '', 'new', 'sale,eco', 'fragile'),
       IF(seq % 3 = 0, NULL, JSON_OBJECT('color', ELT(1 + seq % 3, 'red', 'green', 'blue'), 'size', seq % 10)),
       seq * 3,
       IF(seq % 9 = 0, NULL, 1990 + seq % 30),
       seq % 11 = 0
FROM seq_1_to_300;

CREATE TABLE orders (
  order_id    BIGINT UNSIGNED NOT NULL PRIMARY KEY,              -- above 2^63: exact as DECIMAL(20,0)
  customer_id INT NOT NULL,
  status      ENUM('new','paid','shipped','cancelled') NOT NULL,
  total       DECIMAL(14,2) NOT NULL,
  ordered_at  DATETIME(6) NOT NULL,
  shipped_at  TIMESTAMP(3) NULL DEFAULT NULL,
  note        TEXT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci;

INSERT INTO orders (order_id, customer_id, status, total, ordered_at, shipped_at, note)
SELECT 10000000000000000000 + seq * 7,
       1 + seq % 400,
       ELT(1 + seq % 4, 'new', 'paid', 'shipped', 'cancelled'),
       ROUND(seq * 1.99, 2),
       TIMESTAMP '2024-03-01 08:00:00' + INTERVAL seq * 977 SECOND + INTERVAL seq MICROSECOND,
       IF(seq % 4 = 2, TIMESTAMP '2024-03-02 08:00:00' + INTERVAL seq * 977 SECOND, NULL),
       IF(seq % 10 = 0, CONCAT('Gift wrap, note #', seq, ' — merci'), NULL)
FROM seq_1_to_2000;

CREATE TABLE order_items (
  order_id   BIGINT UNSIGNED NOT NULL,
  line_no    SMALLINT NOT NULL,
  sku        VARCHAR(32) NOT NULL,
  quantity   INT NOT NULL,
  unit_price DECIMAL(10,2) NOT NULL,
  discount   DOUBLE NULL,
  PRIMARY KEY (order_id, line_no)                                 -- composite key
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci;

INSERT INTO order_items (order_id, line_no, sku, quantity, unit_price, discount)
SELECT o.order_id, l.seq,
       CONCAT('ab-', LPAD(1 + (o.order_id + l.seq) % 300, 5, '0')),
       1 + (o.order_id + l.seq) % 5,
       ROUND(2 + l.seq * 1.25, 2),
       IF(l.seq = 2, 0.1, NULL)
FROM orders o JOIN seq_1_to_3 l ON l.seq <= 1 + o.order_id % 3;
