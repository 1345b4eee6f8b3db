// The desktop's sound in the live view (docs/audio.md).
