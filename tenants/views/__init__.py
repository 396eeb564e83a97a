"""The portal's pages, one module per page area. Thin: selectors decide what a user may see,
services make every change, forms parse input and carry the services' errors back to the fields
they name."""
