"""The clipboard, text and images, checked with xclip."""
