"""PyTorch modules for argen development only (goldens, training); the product never imports them."""
