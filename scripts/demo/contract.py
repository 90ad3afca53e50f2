# Imported by scripts/demo/train.py and scripts/demo/evaluate.py (`make demo-assets`); models/README.md.
"""sealcheck preprocessing contract -- the ONE implementation used by train.py and evaluate.py.

The Rust pipeline must reproduce exactly these ops (see models/README.md):

  frame: RGB uint8, any size (H, W, 3)
  seg input  (1x3x640x640): bilinear resize of the 0..255 float32 frame to 640x640
             (half-pixel centres, no antialias; F.interpolate(align_corners=False)),
             then /255, then (x - mean) / std per channel.
  seal mask  (640x640): argmax over the 2 seg logits; 1.0 where class == 1 else 0.0
             (ties -> class 0).
  cls input  (1x4x224x512): RGB = frame resized to 224x512 the same way, /255, (x-mean)/std;
             channel 3 = the 640x640 mask resized bilinearly (half-pixel, float) to 224x512,
             then (m - MASK_MEAN) / MASK_STD.
  decision:  p_defect = softmax(cls logits)[1]; defect iff p_defect >= THRESHOLD.
"""
import numpy as np
import torch
import torch.nn.functional as F

SEG_HW = (640, 640)
CLS_HW = (224, 512)          # (H, W)
RGB_MEAN = (0.485, 0.456, 0.406)
RGB_STD = (0.229, 0.224, 0.225)
MASK_MEAN = 0.0
MASK_STD = 1.0
THRESHOLD = 0.5              # softmax(logits)[1] >= THRESHOLD -> defective
SEAL_CLASS = 1


def frames_to_tensor(frames, device=None):
    """uint8 RGB frames (N,H,W,3) numpy/torch -> float32 NCHW on 0..255."""
    if isinstance(frames, np.ndarray):
        frames = torch.from_numpy(np.array(frames, copy=not frames.flags.writeable or not frames.flags.c_contiguous))
    if frames.dim() == 3:
        frames = frames[None]
    if device is not None:
        frames = frames.to(device, non_blocking=True)
    return frames.permute(0, 3, 1, 2).to(torch.float32)


def _resize(x, hw):
    return F.interpolate(x, size=hw, mode="bilinear", align_corners=False)


def _normalize_rgb(x01):
    mean = torch.tensor(RGB_MEAN, dtype=torch.float32, device=x01.device).view(1, 3, 1, 1)
    std = torch.tensor(RGB_STD, dtype=torch.float32, device=x01.device).view(1, 3, 1, 1)
    return (x01 - mean) / std


def seg_input(x255):
    """x255: float32 N,3,H,W on 0..255 -> N,3,640,640 normalized."""
    return _normalize_rgb(_resize(x255, SEG_HW) / 255.0)


def mask_from_logits(logits):
    """N,2,640,640 logits -> N,640,640 float mask (1.0 seal)."""
    return (logits.argmax(dim=1) == SEAL_CLASS).to(torch.float32)


def cls_input(x255, mask640):
    """x255: N,3,H,W 0..255 float32; mask640: N,640,640 float (0/1) -> N,4,224,512."""
    rgb = _normalize_rgb(_resize(x255, CLS_HW) / 255.0)
    m = _resize(mask640[:, None].to(torch.float32), CLS_HW)
    m = (m - MASK_MEAN) / MASK_STD
    return torch.cat([rgb, m], dim=1)


def gt_mask_640(mask_hw):
    """Ground-truth seal mask (N,H,W bool/uint8 0|1|255) at frame resolution -> N,640,640 bool.

    Resized with the same bilinear op as the frame, then thresholded at 0.5. This is the
    reference the seg IoU is measured against (at the 640x640 logits resolution).
    """
    if isinstance(mask_hw, np.ndarray):
        mask_hw = torch.from_numpy(np.array(mask_hw, copy=True))
    if mask_hw.dim() == 2:
        mask_hw = mask_hw[None]
    m = mask_hw.to(torch.float32)
    if m.max() > 1.5:
        m = m / 255.0
    return _resize(m[:, None], SEG_HW)[:, 0] >= 0.5


def p_defect(cls_logits):
    return torch.softmax(cls_logits.to(torch.float32), dim=1)[:, 1]
